package outboxmongo_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/FerretDB/FerretDB/ferretdb"
	"go.mongodb.org/mongo-driver/v2/bson"
	mdb "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/internal/testutil"
	"github.com/eventhub/eventhub/jetstream"
	"github.com/eventhub/eventhub/outbox"
	"github.com/eventhub/eventhub/outbox/mongo"
)

// startFerretDB runs FerretDB in process, on SQLite files in a temporary
// directory, listening on a random loopback port, and returns a collection
// of a client connected to it.
func startFerretDB(t *testing.T) *mdb.Collection {
	t.Helper()
	f, err := ferretdb.New(&ferretdb.Config{
		Listener:  ferretdb.ListenerConfig{TCP: "127.0.0.1:0"},
		Handler:   "sqlite",
		SQLiteURL: "file:" + t.TempDir() + "/",
		Logger:    slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = f.Run(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done })
	var client *mdb.Client
	testutil.CheckFor(t, 20*time.Second, func() error {
		uri := f.MongoDBURI()
		if uri == "" {
			return errors.New("FerretDB not listening yet")
		}
		c, err := mdb.Connect(options.Client().ApplyURI(uri).SetTimeout(10 * time.Second))
		if err != nil {
			return err
		}
		if err := c.Ping(t.Context(), nil); err != nil {
			_ = c.Disconnect(context.Background())
			return err
		}
		client = c
		return nil
	})
	t.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	return client.Database("app").Collection("outbox")
}

func newStore(t *testing.T) *mongo.Store {
	t.Helper()
	s, err := mongo.New(startFerretDB(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestMongoIndexes(t *testing.T) {
	s := newStore(t)
	if err := s.Migrate(t.Context()); err != nil { // idempotent
		t.Fatal(err)
	}
	specs, err := s.Collection().Indexes().ListSpecifications(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, sp := range specs {
		names[sp.Name] = true
	}
	for _, want := range []string{"claim", "lease", "sent", "topic_key_ts", "correlation_id"} {
		if !names[want] {
			t.Errorf("index %s missing; have %v", want, names)
		}
	}
}

func TestMongoClaimFenceRequeue(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	var ids []string
	for i := range 4 {
		id, err := s.Add(ctx, nil, outbox.Record{Topic: "orders.created", Key: "o", Payload: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)),
			Headers: map[string]string{mongo.HeaderCorrelationID: "req-1"}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if _, err := s.Add(ctx, nil, outbox.Record{Topic: "Bad Topic", Payload: json.RawMessage(`1`)}); !errors.Is(err, facade.ErrBadTopic) {
		t.Fatalf("bad topic: %v", err)
	}
	a, err := s.Claim(ctx, "a", 3, time.Minute)
	if err != nil || len(a) != 3 {
		t.Fatalf("claim a: %d, %v", len(a), err)
	}
	b, err := s.Claim(ctx, "b", 3, 50*time.Millisecond)
	if err != nil || len(b) != 1 || b[0].ID != ids[3] {
		t.Fatalf("claim b: %v, %v", b, err)
	}
	for i, e := range a {
		if e.ID != ids[i] || e.Attempts != 1 || e.Status != outbox.StatusClaimed || string(e.Payload) != fmt.Sprintf(`{"n":%d}`, i) {
			t.Fatalf("claimed %d: %+v", i, e)
		}
	}
	// A stale claim (wrong attempt) settles nothing.
	stale := *a[0]
	stale.Attempts = 7
	if n, err := s.MarkSent(ctx, &stale); err != nil || n != 0 {
		t.Fatalf("stale mark sent: %d, %v", n, err)
	}
	if err := s.MarkError(ctx, &stale, "x"); !errors.Is(err, outbox.ErrLeaseLost) {
		t.Fatalf("stale mark error: %v", err)
	}
	if n, err := s.MarkSent(ctx, a[0]); err != nil || n != 1 {
		t.Fatalf("mark sent: %d, %v", n, err)
	}
	if err := s.MarkError(ctx, a[1], "refused"); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Release(ctx, outbox.ReleaseOptions{Uncount: true, Reason: "unavailable"}, a[2]); err != nil || n != 1 {
		t.Fatalf("release: %d, %v", n, err)
	}
	// b's lease runs out: requeued, then (attempts used up) parked.
	testutil.CheckFor(t, 10*time.Second, func() error {
		rq, pk, err := s.RequeueExpired(ctx, 5)
		if err != nil || rq+pk == 0 {
			return fmt.Errorf("requeued %d, parked %d, %v", rq, pk, err)
		}
		return nil
	})
	want := map[string]struct {
		status   outbox.Status
		attempts int
	}{ids[0]: {outbox.StatusSent, 1}, ids[1]: {outbox.StatusError, 1}, ids[2]: {outbox.StatusPending, 0}, ids[3]: {outbox.StatusPending, 1}}
	for id, w := range want {
		e, err := s.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if e.Status != w.status || e.Attempts != w.attempts {
			t.Errorf("%s: status %s attempts %d, want %s %d", id, e.Status, e.Attempts, w.status, w.attempts)
		}
	}
	if n, err := s.Collection().CountDocuments(ctx, bson.D{{Key: "correlationId", Value: "req-1"}}); err != nil || n != 4 {
		t.Fatalf("by correlation id: %d, %v", n, err)
	}
	if n, err := s.DeleteSent(ctx, 0, 10); err != nil || n != 1 {
		t.Fatalf("delete sent: %d, %v", n, err)
	}
}

// TestMongoDrainer: the outbox drainer publishes MongoDB records to the bus
// with their ids, and marks them sent.
func TestMongoDrainer(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	bus, err := jetstream.Open(ctx, jetstream.OpenConfig{Server: jetstream.ServerConfig{DataDir: t.TempDir(), Port: -1}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bus.Close() })
	var ids []string
	for i := range 20 {
		id, err := s.Add(ctx, nil, outbox.Record{Topic: "orders.created", Payload: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	d, err := outbox.NewDrainer(s, bus, outbox.Config{PollInterval: 20 * time.Millisecond, BatchSize: 8})
	if err != nil {
		t.Fatal(err)
	}
	runDone := make(chan error, 1)
	go func() { runDone <- d.Run(context.Background()) }()
	t.Cleanup(func() {
		_ = d.Shutdown(context.Background())
		<-runDone
	})
	testutil.CheckFor(t, 20*time.Second, func() error {
		for _, id := range ids {
			e, err := s.Get(ctx, id)
			if err != nil {
				return err
			}
			if e.Status != outbox.StatusSent {
				return fmt.Errorf("%s is %s", id, e.Status)
			}
		}
		return nil
	})
	got := map[string]bool{}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	done := make(chan struct{})
	sub, err := bus.Subscribe(cctx, "orders.created", "check", func(_ context.Context, dl facade.Delivery) error {
		got[dl.Event().ID] = true
		if len(got) == len(ids) {
			close(done)
		}
		return nil
	}, facade.SubscribeOptions{From: facade.FromEarliest, MaxInFlight: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Stop(context.Background())
	select {
	case <-done:
	case <-cctx.Done():
		t.Fatalf("%d of %d events in the stream", len(got), len(ids))
	}
	for _, id := range ids {
		if !got[id] {
			t.Errorf("event %s not published with its record id", id)
		}
	}
}

// TestMongoTransaction: the outbox write joins the caller's transaction.
// FerretDB (the MongoDB-wire server these tests run on) does not support
// transactions: when startTransaction is refused, only this test is
// skipped; on a MongoDB replica set it checks that an aborted transaction
// leaves no record and a committed one does.
func TestMongoTransaction(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	client := s.Collection().Database().Client()
	sess, err := client.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.EndSession(context.Background())
	errAbort := errors.New("abort")
	_, err = sess.WithTransaction(ctx, func(ctx context.Context) (any, error) {
		if _, err := s.Add(ctx, nil, outbox.Record{ID: "tx-aborted", Topic: "orders.created", Payload: json.RawMessage(`1`)}); err != nil {
			return nil, err
		}
		return nil, errAbort
	})
	if err != nil && !errors.Is(err, errAbort) {
		t.Skipf("the server does not support transactions (FerretDB does not): %v", err)
	}
	if _, err := s.Get(ctx, "tx-aborted"); !errors.Is(err, outbox.ErrNotFound) {
		t.Fatalf("record of an aborted transaction: %v", err)
	}
	if err := sess.StartTransaction(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Add(ctx, sess, outbox.Record{ID: "tx-committed", Topic: "orders.created", Payload: json.RawMessage(`1`)}); err != nil {
		t.Fatal(err)
	}
	if err := sess.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "tx-committed"); err != nil {
		t.Fatal(err)
	}
}
