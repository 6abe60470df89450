// Package client is the Go SDK of eventhub's WebSocket gateway: a
// [facade.Bus] that speaks the protocol of
// docs/protocol.md to a gateway, so code written against the facade runs
// in-process or remote unchanged.
//
//	c, err := client.Dial(ctx, "ws://127.0.0.1:8090", client.Config{Token: token})
//	...
//	defer c.Close()
//	sub, err := c.Subscribe(ctx, "heartbeat.received", "dash",
//		facade.HandleJSON(func(ctx context.Context, d facade.Delivery, hb Heartbeat) error {
//			return nil // ACK; an error NACKs
//		}), facade.SubscribeOptions{From: facade.FromEarliest})
//
// [Dial] returns once the gateway accepted the token. Publish waits for the
// gateway's OK. Subscribe acknowledges automatically (nil → ACK, error →
// NACK) unless ManualAck is set, in which case the delivery handle's Ack,
// Nack and Extend (MODACK) settle the event. GetCursor and SetCursor use
// the CURSOR and SEEK extension ops.
//
// The client reconnects with backoff when the connection drops and
// subscribes again; calls pending at the drop fail with an error wrapping
// facade.ErrUnavailable, events in flight are handed back by the gateway
// and redelivered. A gateway that refuses or expires the credentials
// (close codes 4500–4999) is not retried: every call then fails with that
// error.
//
// Errors reported by the gateway are *facade.Error values carrying the ERR
// code, so errors.Is works with the facade's and the gateway's sentinels.
//
// A Client is safe for concurrent use. Close is idempotent and waits for the
// client's goroutines and running handlers.
package client
