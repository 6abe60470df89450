// Package limits holds eventhub's rate limits and quotas: token buckets in
// events/s and bytes/s per principal (a token's subject) and per topic
// pattern, and quotas on the topics and groups a principal may create, the
// subscriptions and connections it may hold, and the connections one
// address may open.
//
// A [Limiter] is built from a [Config] (the "limits:" section of the hub's
// configuration file). The gateway asks it before every WebSocket and HTTP
// publish and on every connection; the bus asks it (as a
// jetstream.Guard) before it creates a stream or a durable consumer and
// when a subscription starts, finding the principal in the context
// ([WithPrincipal]).
//
// # Per hub and global
//
// Rate buckets, subscription and connection counts live in the memory of
// one hub: with several hubs on one NATS system a principal gets each
// limit once per hub it reaches. The topic and group quotas count
// creations in a JetStream key-value bucket ([BucketName]) that every hub
// on the same NATS account shares, so they hold across hubs. Account
// JetStream limits (streams, consumers, storage bytes) are NATS's own and
// hold for the whole account.
package limits
