package ops_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"testing"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/jetstream"
	"github.com/eventhub/eventhub/ops"
)

// filterFixture publishes 12 events on one topic: event i has key
// k<i%3>, header correlationId c<i%4> (none for i == 11), and the tag "odd"
// when i is odd; 4 events of another topic in the same family stream are
// interleaved, and must never match.
func filterFixture(t *testing.T) (*env, []*facade.EventRecord) {
	t.Helper()
	e := newEnv(t, familyConfig(), ops.Config{})
	var evs []*facade.EventRecord
	for i := range 12 {
		o := facade.PublishOptions{Key: fmt.Sprintf("k%d", i%3)}
		if i != 11 {
			o.Headers = map[string]string{ops.HeaderCorrelationID: fmt.Sprintf("c%d", i%4)}
		}
		if i%2 == 1 {
			o.Tags = []string{"x", "odd"}
		}
		ev, err := e.bus.Publish(t.Context(), "fam.a", json.RawMessage(fmt.Sprintf(`{"i":%d}`, i)), o)
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
		if i%3 == 0 {
			// Same key and correlation id on a sibling topic of the stream.
			if _, err := e.bus.Publish(t.Context(), "fam.b", json.RawMessage(`{}`), facade.PublishOptions{
				Key: "k0", Tags: []string{"odd"}, Headers: map[string]string{ops.HeaderCorrelationID: "c0"},
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
	return e, evs
}

// familyConfig is busConfig with a family stream for fam.>.
func familyConfig() jetstream.Config {
	c := busConfig
	c.Topics = append(slices.Clone(c.Topics), jetstream.TopicConfig{Pattern: "fam.>", Stream: "FAM"})
	return c
}

// ids returns the ids of the events whose index passes keep.
func ids(evs []*facade.EventRecord, keep func(i int) bool) []string {
	var out []string
	for i, e := range evs {
		if keep(i) {
			out = append(out, e.ID)
		}
	}
	return out
}

func TestReplayFilters(t *testing.T) {
	e, evs := filterFixture(t)
	tests := []struct {
		name, query string
		want        []string
	}{
		{"key", "key=k1", ids(evs, func(i int) bool { return i%3 == 1 })},
		{"correlation id", "correlationId=c2", ids(evs, func(i int) bool { return i%4 == 2 && i != 11 })},
		{"tag", "tag=odd", ids(evs, func(i int) bool { return i%2 == 1 })},
		{"key and correlation id", "key=k0&correlationId=c0", ids(evs, func(i int) bool { return i%3 == 0 && i%4 == 0 })},
		{"correlation id and tag", "correlationId=c1&tag=odd", ids(evs, func(i int) bool { return i%4 == 1 })},
		{"limit counts matches", "tag=odd&limit=2", ids(evs, func(i int) bool { return i == 1 || i == 3 })},
		{"range and filter", "correlationId=c3&from=id:" + evs[4].ID, ids(evs, func(i int) bool { return i%4 == 3 && i >= 4 && i != 11 })},
		{"no match", "correlationId=nope", nil},
		{"unknown key", "key=zz", nil},
		{"case matters", "correlationId=C0", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body, _ := e.get(t, "/replay?topic=fam.a&"+tt.query)
			if status != http.StatusOK {
				t.Fatalf("status %d: %s", status, body)
			}
			var got []string
			for _, ev := range decodeNDJSON(t, body) {
				if ev.Topic != "fam.a" {
					t.Fatalf("event of topic %s in a replay of fam.a", ev.Topic)
				}
				got = append(got, ev.ID)
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("got %v\nwant %v", got, tt.want)
			}
		})
	}
}

func TestExportFilterStats(t *testing.T) {
	e, evs := filterFixture(t)
	ctx := t.Context()
	run := func(v url.Values) ([]facade.EventRecord, ops.ExportStats) {
		t.Helper()
		v.Set("topic", "fam.a")
		q, err := ops.ParseQuery(v)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		st, err := ops.Export(ctx, e.bus, &buf, q)
		if err != nil {
			t.Fatal(err)
		}
		return decodeNDJSON(t, buf.Bytes()), st
	}
	// A correlation id is tested on every event of the topic in the range.
	got, st := run(url.Values{"correlationId": {"c0"}})
	if len(got) != 3 || st.Events != 3 || st.Scanned != int64(len(evs)) {
		t.Fatalf("correlationId: %d lines, stats %+v; want 3 of %d scanned", len(got), st, len(evs))
	}
	if st.LastSeq != got[2].Seq {
		t.Fatalf("LastSeq %d, last line seq %d", st.LastSeq, got[2].Seq)
	}
	// A key is filtered by the server: only the key's events are read.
	got, st = run(url.Values{"key": {"k2"}})
	if len(got) != 4 || st.Scanned != 4 {
		t.Fatalf("key: %d lines, stats %+v; want 4 lines, 4 scanned", len(got), st)
	}
	for _, ev := range got {
		if ev.Key != "k2" {
			t.Fatalf("key filter let through key %q", ev.Key)
		}
	}
	// Cut by limit, the export resumes after LastSeq and finds the rest.
	first, st := run(url.Values{"tag": {"odd"}, "limit": {"4"}})
	rest, _ := run(url.Values{"tag": {"odd"}, "from": {fmt.Sprintf("seq:%d", st.LastSeq+1)}})
	if n := len(first) + len(rest); n != 6 || len(first) != 4 {
		t.Fatalf("tag in two parts: %d + %d events, want 4 + 2", len(first), len(rest))
	}
}

func TestReplayFilterBadRequest(t *testing.T) {
	e, _ := newFakeEnv(t, ops.Config{}, "fam.a")
	long := string(bytes.Repeat([]byte("x"), 1025))
	for _, q := range []string{"key=", "correlationId=", "tag=", "correlationId=" + long, "key=%FF"} {
		status, body, _ := e.get(t, "/replay?topic=fam.a&"+q)
		if status != http.StatusBadRequest {
			t.Errorf("%s: status %d: %s", q, status, body)
		}
	}
}
