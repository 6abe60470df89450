// Package gateway serves eventhub over WebSocket (JSON frames, one per text
// message) and over HTTP (POST /publish/{topic}), on top of any
// [facade.Bus]. docs/protocol.md is the protocol's reference.
//
// # Use
//
//	g, err := gateway.New(bus, gateway.Config{Token: os.Getenv("WS_TOKEN")})
//	...
//	go g.Serve(ctx, ln)           // ln from net.Listen; or mount g.Handler() on your own server
//	...
//	g.Shutdown(shutdownCtx)       // going-away to every client, in-flight events handed back
//
// The gateway never closes the bus it was given.
//
// # Structure
//
// The code is split the way centrifuge splits it:
//
//   - the wire format lives in package [wire], which the Go client shares:
//     [wire.Frame], the op table, [wire.Decode] / [wire.Encode], the
//     hand-rolled encoders of the hot frames, and the one table of error
//     codes ([wire.Codes]): meaning, whether the connection stays open,
//     close code, HTTP status.
//   - session.go executes one decoded frame against the bus and keeps the
//     connection's subscriptions and leases.
//   - transport.go only writes and closes: a bounded queue drained by one
//     writer goroutine. A client whose queue is full is disconnected (4001)
//     rather than waited for; its in-flight events are handed back.
//
// Each connection has exactly two goroutines (reader and writer) plus one
// timer for its leases and, once it publishes, one publish waiter.
//
// # Leases
//
// The gateway subscribes to the bus with ManualAck and MaxInFlight =
// min(opts.maxInFlight, Config.MaxInflightPerSub): the bus never hands a
// subscription more unacknowledged events than that, so a slow client pauses
// its subscription and nothing is dropped. Each EVENT is leased for the
// subscription's ackTimeoutMs; ACK / NACK / MODACK are accepted only for an
// event whose lease is current on that subscription. An expired lease is
// dropped, and the bus hands its event back to the group (attempt+1): each
// lease holds the bus's delivery handle, whose deadline the lease shares.
//
// # Concurrency
//
// [Gateway] methods are safe for concurrent use. [Gateway.Shutdown] blocks
// until every session ended or ctx is done.
package gateway
