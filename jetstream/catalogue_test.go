package jetstream_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/internal/natstest"
	"github.com/eventhub/eventhub/internal/testutil"
	"github.com/eventhub/eventhub/jetstream"
)

// catalogued returns the stream named name as the catalogue lists it for
// filter, with its groups.
func catalogued(c *jetstream.Catalogue, filter, name string) (jetstream.TopicStream, bool) {
	all, err := c.TopicStreams(context.Background(), filter, true)
	if err != nil {
		return jetstream.TopicStream{}, false
	}
	i := slices.IndexFunc(all, func(s jetstream.TopicStream) bool { return s.Name == name })
	if i < 0 {
		return jetstream.TopicStream{}, false
	}
	return all[i], true
}

// TestCatalogueFollowsJetStream: streams and consumers made, changed and
// deleted outside the bus (an operator's nats CLI) reach the catalogue
// through JetStream's advisories; those the bus makes are in it when the
// call that made them returns. It lists what Bus.TopicStreams lists.
func TestCatalogueFollowsJetStream(t *testing.T) {
	b, nc := newBus(t, jetstream.Config{})
	ctx := t.Context()
	pub(t, b, "early.topic", `1`, "")
	c, err := b.WatchCatalogue(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	js, err := njs.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	wait := func(what string, ok func() bool) {
		t.Helper()
		testutil.CheckFor(t, 10*time.Second, func() error {
			if !ok() {
				return fmt.Errorf("the catalogue does not show %s", what)
			}
			return nil
		})
	}

	// Made by the bus: listed at once, groups included.
	unsub, err := b.Subscribe(ctx, "made.topic", "workers", func(context.Context, facade.Delivery) error { return nil }, facade.SubscribeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := unsub.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	made, err := b.TopicStreams(ctx, "made.topic", true)
	if err != nil || len(made) != 1 {
		t.Fatalf("bus: %v %v", made, err)
	}
	if got, ok := catalogued(c, "made.topic", made[0].Name); !ok || len(got.Groups) != 1 || got.Groups[0] != made[0].Groups[0] || got.Topic != "made.topic" {
		t.Fatalf("the catalogue shows %+v (%v), the bus %+v", got, ok, made[0])
	}

	// Made by an operator: seen through the advisories.
	if _, err := js.CreateStream(ctx, njs.StreamConfig{Name: "OPS", Subjects: []string{"ops.a"}, Storage: njs.MemoryStorage}); err != nil {
		t.Fatal(err)
	}
	wait("the operator's stream", func() bool {
		s, ok := catalogued(c, "ops.*", "OPS")
		return ok && slices.Equal(s.Subjects, []string{"ops.a"})
	})
	if _, err := js.CreateConsumer(ctx, "OPS", njs.ConsumerConfig{Durable: "crew", AckPolicy: njs.AckExplicitPolicy,
		Metadata: map[string]string{"eventhub_group": "crew", "eventhub_topic": "ops.a"}}); err != nil {
		t.Fatal(err)
	}
	wait("the operator's group", func() bool {
		s, _ := catalogued(c, "ops.a", "OPS")
		return len(s.Groups) == 1 && s.Groups[0] == jetstream.GroupConsumer{Consumer: "crew", Topic: "ops.a", Group: "crew"}
	})
	if _, err := js.UpdateStream(ctx, njs.StreamConfig{Name: "OPS", Subjects: []string{"ops.a", "ops.b"}, Storage: njs.MemoryStorage}); err != nil {
		t.Fatal(err)
	}
	wait("the stream's new subject", func() bool { _, ok := catalogued(c, "ops.b", "OPS"); return ok })
	if err := js.DeleteConsumer(ctx, "OPS", "crew"); err != nil {
		t.Fatal(err)
	}
	wait("the group gone", func() bool { s, ok := catalogued(c, "ops.a", "OPS"); return ok && len(s.Groups) == 0 })
	if err := js.DeleteStream(ctx, "OPS"); err != nil {
		t.Fatal(err)
	}
	wait("the stream gone", func() bool { _, ok := catalogued(c, ">", "OPS"); return !ok })

	// The catalogue lists what the bus lists.
	want, err := b.TopicStreams(ctx, ">", true)
	if err != nil {
		t.Fatal(err)
	}
	wait("what the bus lists", func() bool {
		got, err := c.TopicStreams(ctx, ">", true)
		return err == nil && fmt.Sprint(sortedByName(got)) == fmt.Sprint(sortedByName(want))
	})
}

func sortedByName(ss []jetstream.TopicStream) []jetstream.TopicStream {
	out := slices.Clone(ss)
	slices.SortFunc(out, func(a, b jetstream.TopicStream) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// TestCatalogueListsAgainAfterReconnect: what changed while the bus was
// disconnected sent it no advisory; the catalogue lists every stream again
// once it is back.
func TestCatalogueListsAgainAfterReconnect(t *testing.T) {
	p := natstest.StartProcess(t)
	b, err := jetstream.Open(t.Context(), jetstream.OpenConfig{
		URL:         p.URL(),
		NATSOptions: []nats.Option{nats.ReconnectWait(100 * time.Millisecond), nats.MaxReconnects(-1)},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	c, err := b.WatchCatalogue(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pub(t, b, "gone.t", `1`, "")
	pub(t, b, "kept.t", `1`, "")
	gone, err := b.TopicStreams(t.Context(), "gone.t", false)
	if err != nil || len(gone) != 1 {
		t.Fatalf("%v %v", gone, err)
	}
	if _, ok := catalogued(c, "gone.t", gone[0].Name); !ok {
		t.Fatal("the catalogue does not show the stream the bus made")
	}
	// Stopped, the stream's files removed, started again: no advisory says
	// the stream is gone.
	p.Stop()
	if err := os.RemoveAll(filepath.Join(p.Dir, "jetstream", "$G", "streams", gone[0].Name)); err != nil {
		t.Fatal(err)
	}
	p.Start()
	testutil.CheckFor(t, 15*time.Second, func() error {
		if _, ok := catalogued(c, ">", gone[0].Name); ok {
			return fmt.Errorf("the catalogue still shows %s", gone[0].Name)
		}
		if _, err := c.TopicStreams(t.Context(), "kept.t", false); err != nil {
			return err
		}
		return nil
	})
	if kept, err := c.TopicStreams(t.Context(), "kept.t", false); err != nil || len(kept) != 1 {
		t.Fatalf("the stream that stayed: %v %v", kept, err)
	}
}
