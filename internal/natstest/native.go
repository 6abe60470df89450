package natstest

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/eventhub/eventhub/facade/facadetest"
)

// Native returns the plain JetStream client of the conformance suite's
// interoperability cases ([facadetest.Env.Native]): a connection to url,
// closed when the test ends.
func Native(t testing.TB, url string) facadetest.Native {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatalf("natstest: connect %s: %v", url, err)
	}
	t.Cleanup(nc.Close)
	return NativeConn(t, nc)
}

// NativeConn is [Native] over a connection the caller owns.
func NativeConn(t testing.TB, nc *nats.Conn) facadetest.Native {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("natstest: jetstream: %v", err)
	}
	return native{js}
}

type native struct{ js jetstream.JetStream }

func (n native) Publish(ctx context.Context, subject string, data []byte) error {
	_, err := n.js.Publish(ctx, subject, data)
	return err
}

func (n native) Follow(t testing.TB, topic string) func() (facadetest.NativeMsg, error) {
	t.Helper()
	name, err := n.js.StreamNameBySubject(t.Context(), topic)
	if err != nil {
		t.Fatalf("natstest: stream of %s: %v", topic, err)
	}
	cons, err := n.js.OrderedConsumer(t.Context(), name, jetstream.OrderedConsumerConfig{FilterSubjects: []string{topic + ".>"}})
	if err != nil {
		t.Fatalf("natstest: consumer on %s: %v", name, err)
	}
	return func() (facadetest.NativeMsg, error) {
		msg, err := cons.Next(jetstream.FetchMaxWait(15 * time.Second))
		if err != nil {
			return facadetest.NativeMsg{}, err
		}
		meta, err := msg.Metadata()
		if err != nil {
			return facadetest.NativeMsg{}, err
		}
		return facadetest.NativeMsg{Subject: msg.Subject(), Data: msg.Data(), Header: msg.Headers(), Seq: meta.Sequence.Stream}, nil
	}
}
