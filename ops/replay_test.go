package ops_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	njs "github.com/nats-io/nats.go/jetstream"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/internal/testutil"
	"github.com/eventhub/eventhub/jetstream"
	"github.com/eventhub/eventhub/ops"
)

func (f *fixture) replay(t *testing.T, query string) ([]facade.EventRecord, http.Header) {
	t.Helper()
	status, body, hdr := f.get(t, "/replay?"+query)
	if status != http.StatusOK {
		t.Fatalf("replay %s: %d %s", query, status, body)
	}
	if ct := hdr.Get("Content-Type"); ct != "application/x-ndjson" {
		t.Fatalf("replay Content-Type %q", ct)
	}
	return decodeNDJSON(t, body), hdr
}

func TestReplayRanges(t *testing.T) {
	f := newFixture(t)
	ts := func(i int) string { return url.QueryEscape(f.stored[i].Format(time.RFC3339Nano)) }
	// Events stored in [t4, t8): computed from the stored times, which
	// may repeat.
	var inWindow []uint64
	for i, st := range f.stored {
		if !st.Before(f.stored[3]) && st.Before(f.stored[7]) {
			inWindow = append(inWindow, uint64(i+1))
		}
	}
	var msWindow []uint64
	fromMs, toMs := f.stored[2].UnixMilli(), f.stored[8].UnixMilli()+1
	for i, st := range f.stored {
		if ms := st.UnixNano() / 1e6; ms >= fromMs && ms < toMs && !st.Before(time.UnixMilli(fromMs)) {
			msWindow = append(msWindow, uint64(i+1))
		}
	}
	tests := []struct {
		name, query string
		want        []uint64
	}{
		{"all", "topic=" + orders, seqRange(1, 10)},
		{"by seq", "topic=" + orders + "&from=seq:3&to=seq:7", seqRange(3, 7)},
		{"bare seq", "topic=" + orders + "&from=3&to=7", seqRange(3, 7)},
		{"by time", "topic=" + orders + "&from=ts:" + ts(3) + "&to=ts:" + ts(7), inWindow},
		{"bare time", "topic=" + orders + "&from=" + ts(3) + "&to=" + ts(7), inWindow},
		{"epoch ms", "topic=" + orders + "&from=ts:" + strconv.FormatInt(fromMs, 10) + "&to=ts:" + strconv.FormatInt(toMs, 10), msWindow},
		{"by id", "topic=" + orders + "&from=id:" + f.events[2].ID + "&to=id:" + f.events[7].ID, seqRange(3, 8)},
		{"bare id", "topic=" + orders + "&from=" + f.events[2].ID + "&to=" + f.events[7].ID, seqRange(3, 8)},
		{"mixed", "topic=" + orders + "&from=id:" + f.events[1].ID + "&to=seq:4", seqRange(2, 4)},
		{"limit", "topic=" + orders + "&from=seq:2&limit=3", seqRange(2, 4)},
		{"limit past range", "topic=" + orders + "&from=seq:9&limit=5", seqRange(9, 10)},
		{"past the end", "topic=" + orders + "&from=seq:8&to=seq:1000", seqRange(8, 10)},
		{"beyond the end", "topic=" + orders + "&from=seq:50", nil},
		{"to before from", "topic=" + orders + "&from=seq:5&to=seq:4", nil},
		{"time after the end", "topic=" + orders + "&from=ts:" + url.QueryEscape(time.Now().Add(time.Hour).Format(time.RFC3339)), nil},
		{"compacted, keyed", "topic=process.state", []uint64{2, 3}},
		{"earliest to latest", "topic=" + orders + "&from=earliest&to=latest", seqRange(1, 10)},
		{"earliest to a seq", "topic=" + orders + "&from=earliest&to=seq:4", seqRange(1, 4)},
		{"a seq to latest", "topic=" + orders + "&from=seq:8&to=latest", seqRange(8, 10)},
		{"from latest: nothing already stored", "topic=" + orders + "&from=latest", nil},
		{"to earliest: nothing", "topic=" + orders + "&to=earliest", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, _ := f.replay(t, tc.query)
			if !slices.Equal(seqsOf(got), tc.want) {
				t.Fatalf("seqs %v, want %v", seqsOf(got), tc.want)
			}
			for _, e := range got {
				var want *facade.EventRecord
				if e.Topic == orders {
					want = f.events[e.Seq-1]
				} else {
					want = f.states[e.Seq-1]
				}
				if e.ID != want.ID || e.TS != want.TS || e.Topic != want.Topic || e.Key != want.Key || string(e.Payload) != string(want.Payload) {
					t.Fatalf("event %d: got %+v, want %+v", e.Seq, e, want)
				}
			}
		})
	}

	_, hdr := f.replay(t, "topic="+orders+"&from=seq:3&to=seq:7")
	if hdr.Get("Eventhub-Replay-From-Seq") != "3" || hdr.Get("Eventhub-Replay-To-Seq") != "7" {
		t.Fatalf("range headers %v", hdr)
	}
}

// TestReplaySharedStream replays one topic of a family stream whose last
// messages belong to another topic: the replay must end after the topic's
// last event instead of waiting for more.
func TestReplaySharedStream(t *testing.T) {
	f := &fixture{env: newEnv(t, busConfig, ops.Config{})}
	var want []string
	for i := range 6 {
		want = append(want, publish(t, f.bus, "audit.login", fmt.Sprintf(`{"i":%d}`, i), "").ID)
		publish(t, f.bus, "audit.logout", fmt.Sprintf(`{"i":%d}`, i), "")
	}
	for range 3 {
		publish(t, f.bus, "audit.logout", `{}`, "")
	}
	got, _ := f.replay(t, "topic=audit.login")
	var ids []string
	for _, e := range got {
		ids = append(ids, e.ID)
		if e.Topic != "audit.login" {
			t.Fatalf("replay of audit.login holds %s", e.Topic)
		}
	}
	if !slices.Equal(ids, want) {
		t.Fatalf("ids %v, want %v", ids, want)
	}
	// From after audit.login's last event: nothing, at once.
	got, _ = f.replay(t, "topic=audit.login&from=seq:12")
	if len(got) != 0 {
		t.Fatalf("replay after the topic's last event: %v", seqsOf(got))
	}
}

// TestReplayFlushes uses a small FlushEvery: the answer is the same.
func TestReplayFlushes(t *testing.T) {
	f := &fixture{env: newEnv(t, jetstream.Config{}, ops.Config{FlushEvery: 7})}
	publishMany(t, f.bus, "many.events", 500, func(i int) string { return fmt.Sprintf(`{"i":%d}`, i) })
	got, _ := f.replay(t, "topic=many.events")
	if !slices.Equal(seqsOf(got), seqRange(1, 500)) {
		t.Fatalf("got %d events", len(got))
	}
	for i, e := range got {
		if string(e.Payload) != fmt.Sprintf(`{"i":%d}`, i) {
			t.Fatalf("event %d payload %s", i, e.Payload)
		}
	}
}

// TestReplayDisconnect drops the client in the middle of a replay too
// large for the socket buffers: the handler must end, its consumer must be
// deleted and no goroutine may be left. A second replay while the first
// runs is refused (MaxConcurrentReplays 1).
func TestReplayDisconnect(t *testing.T) {
	f := &fixture{env: newEnv(t, jetstream.Config{}, ops.Config{MaxConcurrentReplays: 1})}
	const n = 2000
	blob := strings.Repeat("x", 16<<10)
	publishMany(t, f.bus, "big.blobs", n, func(int) string { return `"` + blob + `"` })

	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	defer client.CloseIdleConnections()
	before := testutil.Goroutines()

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.srv.URL+"/replay?topic=big.blobs", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(resp.Body).ReadBytes('\n')
	if err != nil || !bytes.Contains(line, []byte(`"seq":1}`)) {
		t.Fatalf("first line %.80q: %v", line, err)
	}

	resp2, err := client.Get(f.srv.URL + "/replay?topic=big.blobs")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp2.Body)
	resp2.Body.Close()
	if resp2.StatusCode != http.StatusTooManyRequests || !bytes.Contains(body, []byte(`"too_many_requests"`)) {
		t.Fatalf("second replay: %d %s", resp2.StatusCode, body)
	}

	cancel()
	resp.Body.Close()
	var rec logRecord
	testutil.CheckFor(t, 10*time.Second, func() error {
		rec, err = f.logs.find("replay ended by the client")
		return err
	})
	if events, _ := strconv.Atoi(rec.attrs["events"]); events <= 0 || events >= n {
		t.Fatalf("the replay wrote %d events before the client left; want some, not all %d", events, n)
	}
	testutil.CheckFor(t, 10*time.Second, func() error { return testutil.NewGoroutines(before) })

	ti, err := f.bus.LookupTopic(t.Context(), "big.blobs")
	if err != nil {
		t.Fatal(err)
	}
	testutil.CheckFor(t, 10*time.Second, func() error {
		names := ti.Stream.ConsumerNames(t.Context())
		var left []string
		for name := range names.Name() {
			left = append(left, name)
		}
		if len(left) > 0 {
			return fmt.Errorf("consumers left: %v", left)
		}
		return names.Err()
	})

	// The slot is free again.
	got, _ := f.replay(t, "topic=big.blobs&from=seq:1999")
	if !slices.Equal(seqsOf(got), []uint64{1999, 2000}) {
		t.Fatalf("replay after the disconnect: %v", seqsOf(got))
	}
}

func TestExportFile(t *testing.T) {
	f := newFixture(t)
	path := filepath.Join(t.TempDir(), "orders.ndjson")
	q := ops.Query{Topic: orders, From: ops.Position{Kind: ops.PosSeq, Seq: 2}, Limit: 5}
	st, err := ops.ExportFile(t.Context(), f.bus, path, q, ops.WithFlushEvery(2))
	if err != nil {
		t.Fatal(err)
	}
	body, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got := decodeNDJSON(t, body)
	if !slices.Equal(seqsOf(got), seqRange(2, 6)) {
		t.Fatalf("exported %v", seqsOf(got))
	}
	want := ops.ExportStats{FromSeq: 2, ToSeq: 10, Events: 5, Scanned: 5, Bytes: int64(len(body)), LastSeq: 6}
	if st != want {
		t.Fatalf("stats %+v, want %+v", st, want)
	}

	// A failed export leaves no file behind.
	bad := filepath.Join(t.TempDir(), "bad.ndjson")
	q.From = ops.Position{Kind: ops.PosID, ID: facade.NewID()}
	if _, err := ops.ExportFile(t.Context(), f.bus, bad, q); !errors.Is(err, facade.ErrUnknownID) {
		t.Fatalf("export from an unknown id: %v", err)
	}
	if entries, _ := os.ReadDir(filepath.Dir(bad)); len(entries) != 0 {
		t.Fatalf("files left: %v", entries)
	}
	if _, err := ops.Export(t.Context(), f.bus, &bytes.Buffer{}, q, ops.WithFlushEvery(0)); !errors.Is(err, facade.ErrInvalidOption) {
		t.Fatalf("WithFlushEvery(0): %v", err)
	}
}

// TestExportCancel cancels an export from its writer: Export returns the
// context's error and stops at once.
func TestExportCancel(t *testing.T) {
	f := &fixture{env: newEnv(t, jetstream.Config{}, ops.Config{})}
	publishMany(t, f.bus, "many.events", 3000, func(i int) string { return fmt.Sprintf(`{"i":%d}`, i) })
	ctx, cancel := context.WithCancel(t.Context())
	w := &cancelWriter{cancel: cancel}
	st, err := ops.Export(ctx, f.bus, w, ops.Query{Topic: "many.events"}, ops.WithFlushEvery(100))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("export: %v (%+v)", err, st)
	}
	if st.Events >= 3000 || w.writes == 0 {
		t.Fatalf("export went on after the cancel: %+v", st)
	}
	ti, err := f.bus.LookupTopic(t.Context(), "many.events")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(consumersOf(t, ti.Stream)); n != 0 {
		t.Fatalf("%d consumers left", n)
	}
}

type cancelWriter struct {
	cancel context.CancelFunc
	writes int
}

func (w *cancelWriter) Write(p []byte) (int, error) {
	w.writes++
	w.cancel()
	return len(p), nil
}

func consumersOf(t *testing.T, s njs.Stream) []string {
	t.Helper()
	l := s.ConsumerNames(t.Context())
	var out []string
	for name := range l.Name() {
		out = append(out, name)
	}
	if err := l.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
