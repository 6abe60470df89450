// Package mongo is the transactional outbox on MongoDB: the same records,
// statuses and [outbox.Drainer] as the SQL stores, kept in one collection.
//
// A service adds its records inside its own session, so that on a replica
// set the outbox write commits with its business writes:
//
//	sess, _ := client.StartSession()
//	defer sess.EndSession(ctx)
//	_, err := sess.WithTransaction(ctx, func(ctx context.Context) (any, error) {
//		if _, err := orders.InsertOne(ctx, order); err != nil { return nil, err }
//		return store.Add(ctx, nil, outbox.Record{Topic: "orders.created", Payload: p})
//	})
//
// (Add also takes a *mongo.Session explicitly.) Transactions need a replica
// set or a sharded cluster; on a standalone server every write stands alone.
//
// A drainer claims records one findOneAndUpdate each (oldest due pending
// record → claimed, with a lease and an attempt counted), so drainers in
// several processes never claim the same record; settling a claim is
// fenced by worker and attempt, as in the SQL stores. Times are the
// drainer's clock (the SQL stores use the database's): keep drainer
// clocks in sync to well under the lease.
//
// The tests run against FerretDB 1.24 embedded in the test process (SQLite
// backend): claims, fencing, expiry, cleanup, indexes and the drainer are
// tested there. FerretDB has no transactions (startTransaction is refused),
// so TestMongoTransaction skips, saying why; on a MongoDB replica set it
// runs.
//
// Indexes ([Store.Migrate]): (status, nextAttemptAt, createdAt) for claims,
// (status, leaseUntil) for expired leases, (status, sentAt) for cleanup,
// (topic, key, createdAt) to find a topic's or a key's records in time
// order, and correlationId (the record's "correlationId" header, copied to
// a field) to find the records of one request.
package mongo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	mdb "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/outbox"
)

// HeaderCorrelationID is the record header copied to the indexed
// correlationId field.
const HeaderCorrelationID = "correlationId"

// Store is an outbox collection. It is safe for concurrent use by any
// number of goroutines and processes. It borrows the collection's client
// and never disconnects it.
type Store struct {
	coll *mdb.Collection
}

var _ outbox.Backend = (*Store)(nil)

// New returns a store on coll. It does no I/O: call [Store.Migrate].
func New(coll *mdb.Collection) (*Store, error) {
	if coll == nil {
		return nil, fmt.Errorf("%w: nil collection", outbox.ErrInvalidConfig)
	}
	return &Store{coll: coll}, nil
}

// doc is a record as stored.
type doc struct {
	ID            string            `bson:"_id"`
	Topic         string            `bson:"topic"`
	Key           string            `bson:"key"`
	Payload       string            `bson:"payload"`
	Headers       map[string]string `bson:"headers,omitempty"`
	CorrelationID string            `bson:"correlationId,omitempty"`
	Status        string            `bson:"status"`
	Attempts      int               `bson:"attempts"`
	LastErr       string            `bson:"lastErr,omitempty"`
	ClaimedBy     string            `bson:"claimedBy,omitempty"`
	LeaseUntil    *time.Time        `bson:"leaseUntil,omitempty"`
	CreatedAt     time.Time         `bson:"createdAt"`
	NextAttemptAt time.Time         `bson:"nextAttemptAt"`
	SentAt        *time.Time        `bson:"sentAt,omitempty"`
}

func (d *doc) entry() *outbox.Entry {
	e := &outbox.Entry{
		Record: outbox.Record{ID: d.ID, Topic: d.Topic, Key: d.Key, Payload: []byte(d.Payload), Headers: d.Headers},
		Status: outbox.Status(d.Status), Attempts: d.Attempts, LastErr: d.LastErr, ClaimedBy: d.ClaimedBy,
		CreatedAt: d.CreatedAt, NextAttemptAt: d.NextAttemptAt,
	}
	if d.LeaseUntil != nil {
		e.LeaseUntil = *d.LeaseUntil
	}
	if d.SentAt != nil {
		e.SentAt = *d.SentAt
	}
	return e
}

// Table returns the collection's name.
func (s *Store) Table() string { return s.coll.Name() }

// Collection returns the store's collection.
func (s *Store) Collection() *mdb.Collection { return s.coll }

// Migrate creates the collection's indexes if they do not exist. It is
// idempotent and blocks.
func (s *Store) Migrate(ctx context.Context) error {
	names := []string{"claim", "lease", "sent", "topic_key_ts", "correlation_id"}
	models := []mdb.IndexModel{
		{Keys: bson.D{{Key: "status", Value: 1}, {Key: "nextAttemptAt", Value: 1}, {Key: "createdAt", Value: 1}}, Options: options.Index().SetName("claim")},
		{Keys: bson.D{{Key: "status", Value: 1}, {Key: "leaseUntil", Value: 1}}, Options: options.Index().SetName("lease")},
		{Keys: bson.D{{Key: "status", Value: 1}, {Key: "sentAt", Value: 1}}, Options: options.Index().SetName("sent")},
		{Keys: bson.D{{Key: "topic", Value: 1}, {Key: "key", Value: 1}, {Key: "createdAt", Value: 1}}, Options: options.Index().SetName("topic_key_ts")},
		{Keys: bson.D{{Key: "correlationId", Value: 1}}, Options: options.Index().SetName("correlation_id")},
	}
	// Create only the missing ones: asking again for an existing index is
	// a no-op on MongoDB but drops the connection on FerretDB 1.24.
	specs, err := s.coll.Indexes().ListSpecifications(ctx)
	if err != nil {
		return fmt.Errorf("outbox: migrate %s: %w", s.Table(), err)
	}
	have := make(map[string]bool, len(specs))
	for _, sp := range specs {
		have[sp.Name] = true
	}
	var missing []mdb.IndexModel
	for i, m := range models {
		if !have[names[i]] {
			missing = append(missing, m)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if _, err := s.coll.Indexes().CreateMany(ctx, missing); err != nil {
		return fmt.Errorf("outbox: migrate %s: %w", s.Table(), err)
	}
	return nil
}

// Add writes rec inside sess (nil: the session ctx carries, if any, as
// inside sess.WithTransaction) and returns its id: rec.ID, or a new
// uuidv7. It validates rec as [outbox.Record.Validate] does. An id already
// in the collection fails with the server's duplicate-key error. It blocks.
func (s *Store) Add(ctx context.Context, sess *mdb.Session, rec outbox.Record) (string, error) {
	if err := rec.Validate(); err != nil {
		return "", err
	}
	if rec.ID == "" {
		rec.ID = facade.NewID()
	}
	if sess != nil {
		ctx = mdb.NewSessionContext(ctx, sess)
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	d := doc{
		ID: rec.ID, Topic: rec.Topic, Key: rec.Key, Payload: string(rec.Payload), Headers: rec.Headers,
		CorrelationID: rec.Headers[HeaderCorrelationID],
		Status:        string(outbox.StatusPending), CreatedAt: now, NextAttemptAt: now,
	}
	if _, err := s.coll.InsertOne(ctx, d); err != nil {
		return "", fmt.Errorf("outbox: add %s: %w", rec.ID, err)
	}
	return rec.ID, nil
}

// Claim claims up to n due pending records for worker with a lease, oldest
// first, one findOneAndUpdate each. It blocks.
func (s *Store) Claim(ctx context.Context, worker string, n int, lease time.Duration) ([]*outbox.Entry, error) {
	if worker == "" || n <= 0 || lease <= 0 {
		return nil, fmt.Errorf("%w: Claim needs a worker, n > 0 and lease > 0", outbox.ErrInvalidConfig)
	}
	var out []*outbox.Entry
	opts := options.FindOneAndUpdate().
		SetSort(bson.D{{Key: "createdAt", Value: 1}, {Key: "_id", Value: 1}}).
		SetReturnDocument(options.After)
	for range n {
		now := time.Now().UTC()
		var d doc
		err := s.coll.FindOneAndUpdate(ctx,
			bson.D{{Key: "status", Value: string(outbox.StatusPending)}, {Key: "nextAttemptAt", Value: bson.D{{Key: "$lte", Value: now}}}},
			bson.D{
				{Key: "$set", Value: bson.D{{Key: "status", Value: string(outbox.StatusClaimed)}, {Key: "claimedBy", Value: worker}, {Key: "leaseUntil", Value: now.Add(lease)}}},
				{Key: "$inc", Value: bson.D{{Key: "attempts", Value: 1}}},
			}, opts).Decode(&d)
		if errors.Is(err, mdb.ErrNoDocuments) {
			break
		}
		if err != nil {
			return out, fmt.Errorf("outbox: claim: %w", err)
		}
		out = append(out, d.entry())
	}
	return out, nil
}

// fence is the filter of an entry's claim: still claimed by the same worker
// in the same attempt.
func fence(e *outbox.Entry) bson.D {
	return bson.D{{Key: "_id", Value: e.ID}, {Key: "status", Value: string(outbox.StatusClaimed)},
		{Key: "claimedBy", Value: e.ClaimedBy}, {Key: "attempts", Value: e.Attempts}}
}

// settle applies update to each entry whose claim is still held and
// returns how many it changed.
func (s *Store) settle(ctx context.Context, entries []*outbox.Entry, update func(e *outbox.Entry) bson.D) (int64, error) {
	var n int64
	for _, e := range entries {
		res, err := s.coll.UpdateOne(ctx, fence(e), update(e))
		if err != nil {
			return n, err
		}
		n += res.ModifiedCount
	}
	return n, nil
}

// MarkSent marks claimed entries sent (only those whose claim is still
// held) and returns how many it marked. It blocks.
func (s *Store) MarkSent(ctx context.Context, entries ...*outbox.Entry) (int64, error) {
	now := time.Now().UTC()
	n, err := s.settle(ctx, entries, func(*outbox.Entry) bson.D {
		return bson.D{{Key: "$set", Value: bson.D{{Key: "status", Value: string(outbox.StatusSent)}, {Key: "sentAt", Value: now}}},
			{Key: "$unset", Value: bson.D{{Key: "leaseUntil", Value: ""}}}}
	})
	if err != nil {
		return n, fmt.Errorf("outbox: mark sent: %w", err)
	}
	return n, nil
}

// Release makes claimed entries pending again as opts say (see
// [outbox.Store.Release]). It blocks.
func (s *Store) Release(ctx context.Context, opts outbox.ReleaseOptions, entries ...*outbox.Entry) (int64, error) {
	due := time.Now().UTC().Add(max(opts.Delay, 0))
	n, err := s.settle(ctx, entries, func(*outbox.Entry) bson.D {
		set := bson.D{{Key: "status", Value: string(outbox.StatusPending)}, {Key: "nextAttemptAt", Value: due}}
		if opts.Reason != "" {
			set = append(set, bson.E{Key: "lastErr", Value: truncate(opts.Reason)})
		}
		u := bson.D{{Key: "$set", Value: set}, {Key: "$unset", Value: bson.D{{Key: "leaseUntil", Value: ""}}}}
		if opts.Uncount {
			u = append(u, bson.E{Key: "$inc", Value: bson.D{{Key: "attempts", Value: -1}}})
		}
		return u
	})
	if err != nil {
		return n, fmt.Errorf("outbox: release: %w", err)
	}
	return n, nil
}

// MarkError parks a claimed entry as error with reason. Errors wrap
// [outbox.ErrLeaseLost] when the claim is no longer held. It blocks.
func (s *Store) MarkError(ctx context.Context, e *outbox.Entry, reason string) error {
	n, err := s.settle(ctx, []*outbox.Entry{e}, func(*outbox.Entry) bson.D {
		return bson.D{{Key: "$set", Value: bson.D{{Key: "status", Value: string(outbox.StatusError)}, {Key: "lastErr", Value: truncate(reason)}}},
			{Key: "$unset", Value: bson.D{{Key: "leaseUntil", Value: ""}}}}
	})
	if err != nil {
		return fmt.Errorf("outbox: mark error %s: %w", e.ID, err)
	}
	if n == 0 {
		return fmt.Errorf("outbox: mark error %s: %w", e.ID, outbox.ErrLeaseLost)
	}
	return nil
}

// RequeueExpired parks claimed records whose lease expired and that had
// maxAttempts attempts (maxAttempts <= 0: never), and makes the others
// pending again, due at once. It blocks.
func (s *Store) RequeueExpired(ctx context.Context, maxAttempts int) (requeued, parked int64, err error) {
	now := time.Now().UTC()
	expired := func(extra ...bson.E) bson.D {
		return append(bson.D{{Key: "status", Value: string(outbox.StatusClaimed)}, {Key: "leaseUntil", Value: bson.D{{Key: "$lt", Value: now}}}}, extra...)
	}
	if maxAttempts > 0 {
		res, err := s.coll.UpdateMany(ctx, expired(bson.E{Key: "attempts", Value: bson.D{{Key: "$gte", Value: maxAttempts}}}),
			bson.D{{Key: "$set", Value: bson.D{{Key: "status", Value: string(outbox.StatusError)}, {Key: "lastErr", Value: "lease expired after the last attempt"}}},
				{Key: "$unset", Value: bson.D{{Key: "leaseUntil", Value: ""}}}})
		if err != nil {
			return 0, 0, fmt.Errorf("outbox: requeue expired: %w", err)
		}
		parked = res.ModifiedCount
	}
	res, err := s.coll.UpdateMany(ctx, expired(),
		bson.D{{Key: "$set", Value: bson.D{{Key: "status", Value: string(outbox.StatusPending)}, {Key: "nextAttemptAt", Value: now}, {Key: "lastErr", Value: "lease expired"}}},
			{Key: "$unset", Value: bson.D{{Key: "leaseUntil", Value: ""}}}})
	if err != nil {
		return 0, parked, fmt.Errorf("outbox: requeue expired: %w", err)
	}
	return res.ModifiedCount, parked, nil
}

// DeleteSent deletes up to limit records sent more than olderThan ago and
// returns how many it deleted. It blocks.
func (s *Store) DeleteSent(ctx context.Context, olderThan time.Duration, limit int) (int64, error) {
	if limit <= 0 {
		return 0, nil
	}
	cur, err := s.coll.Find(ctx,
		bson.D{{Key: "status", Value: string(outbox.StatusSent)}, {Key: "sentAt", Value: bson.D{{Key: "$lt", Value: time.Now().UTC().Add(-max(olderThan, 0))}}}},
		options.Find().SetLimit(int64(limit)).SetProjection(bson.D{{Key: "_id", Value: 1}}))
	if err != nil {
		return 0, fmt.Errorf("outbox: delete sent: %w", err)
	}
	var ids []struct {
		ID string `bson:"_id"`
	}
	if err := cur.All(ctx, &ids); err != nil {
		return 0, fmt.Errorf("outbox: delete sent: %w", err)
	}
	if len(ids) == 0 {
		return 0, nil
	}
	in := make(bson.A, len(ids))
	for i, x := range ids {
		in[i] = x.ID
	}
	res, err := s.coll.DeleteMany(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: in}}}, {Key: "status", Value: string(outbox.StatusSent)}})
	if err != nil {
		return 0, fmt.Errorf("outbox: delete sent: %w", err)
	}
	return res.DeletedCount, nil
}

// Get returns the record id. Errors wrap [outbox.ErrNotFound]. It blocks.
func (s *Store) Get(ctx context.Context, id string) (*outbox.Entry, error) {
	var d doc
	err := s.coll.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&d)
	if errors.Is(err, mdb.ErrNoDocuments) {
		return nil, fmt.Errorf("outbox: %s: %w", id, outbox.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("outbox: get %s: %w", id, err)
	}
	return d.entry(), nil
}

// truncate bounds an error text.
func truncate(s string) string {
	const maxErr = 2000
	if len(s) > maxErr {
		return s[:maxErr] + "…"
	}
	return s
}
