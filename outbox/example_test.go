package outbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/eventhub/eventhub/jetstream"
	"github.com/eventhub/eventhub/outbox"
	_ "github.com/eventhub/eventhub/outbox/sqlite" // links the SQLite driver for outbox.Open
)

// A service writes an order and its event in one transaction; the drainer
// publishes the event once the transaction has committed.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "outbox-example-")
	defer os.RemoveAll(dir)

	// The event bus: an embedded NATS server here.
	bus, err := jetstream.Open(ctx, jetstream.OpenConfig{
		Server: jetstream.ServerConfig{DataDir: filepath.Join(dir, "nats"), Port: -1},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer bus.Close()

	// The service's database, with the outbox table in it.
	store, err := outbox.Open(ctx, "sqlite:"+filepath.Join(dir, "shop.db"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer store.Close()
	db := store.DB()
	if _, err := db.ExecContext(ctx, `CREATE TABLE orders (id INTEGER PRIMARY KEY, total INTEGER)`); err != nil {
		fmt.Println(err)
		return
	}

	drainer, err := outbox.NewDrainer(store, bus, outbox.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	go drainer.Run(ctx)
	defer drainer.Close()

	// The business row and the event, in one transaction.
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `INSERT INTO orders (id, total) VALUES (?, ?)`, 42, 1999); err != nil {
		fmt.Println(err)
		return
	}
	id, err := store.Add(ctx, tx, outbox.Record{
		Topic:   "orders.created",
		Key:     "order:42",
		Payload: json.RawMessage(`{"order":42,"total":1999}`),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := tx.Commit(); err != nil {
		fmt.Println(err)
		return
	}
	drainer.Notify()

	// Wait until the drainer has published it.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		e, err := store.Get(ctx, id)
		if err == nil && e.Status == outbox.StatusSent {
			fmt.Println("order 42 published as", e.Topic, "with key", e.Key)
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	fmt.Println("not published")
	// Output: order 42 published as orders.created with key order:42
}
