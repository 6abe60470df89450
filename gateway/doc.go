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
//     connection's subscriptions and leases; session_live.go and live.go
//     its live subscriptions, which share one follower per topic.
//   - members.go holds the gateway's one bus member per group and topic,
//     shared by every subscription of that group on this gateway.
//   - transport.go only writes and closes: a bounded queue drained by one
//     writer goroutine. A client whose queue is full is disconnected (4001)
//     rather than waited for; its in-flight events are handed back. After
//     its close frame the gateway reads (and drops) what the client still
//     sends until the client's close frame (up to the write timeout while
//     the client keeps sending, a second once it sends nothing), so that
//     the last frames are not lost to a connection reset.
//
// Each connection has two goroutines, its reader and its writer, and, once
// it publishes on a bus that pipelines publishes ([facade.AsyncPublisher]),
// a third that answers them in order. Its timers: the writer's ping
// ticker, the AUTH timer until AUTH succeeds, and one for the token's
// expiry when it has one. Leases have no timer of their own: a lease ends
// when its delivery does ([facade.Delivery.AfterExpire]).
//
// # Leases
//
// The gateway's member of a group subscribes to the bus with ManualAck.
// Its MaxInFlight, the group's window, is the first subscription's
// maxInFlight when it names one (at most Config.MaxInflightPerSub), else
// its groupMaxInFlight (at most Config.GroupMaxInFlight), else
// Config.GroupMaxInFlight; it pulls batches no larger than that
// subscription's window. Each subscription holds at most its own window,
// min(maxInFlight, Config.MaxInflightPerSub), of leases; the member hands
// each event to an attached subscription with room, round robin, and waits
// while none has room (keeping the event's deadline at the store ahead), so
// a slow client pauses the pull and nothing is dropped.
//
// Each EVENT is leased for the subscription's ackTimeoutMs (at most
// Config.MaxAckTimeout): the lease's deadline is the delivery's, set with
// [facade.Delivery.Extend] when the subscription's ack timeout differs
// from the member's. ACK / NACK / MODACK are accepted only for an event
// whose lease is current on that subscription, and MODACK extends the
// delivery. When the delivery expires the lease is dropped and the bus
// hands the event back to its group with attempt+1. An event whose EVENT frame was never written when
// the connection ends goes back without spending an attempt when the bus's
// deliveries are [facade.Releaser]s.
//
// # Concurrency
//
// [Gateway] methods are safe for concurrent use. [Gateway.Shutdown] blocks
// until every session ended or ctx is done.
package gateway
