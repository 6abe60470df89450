package ops_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	njs "github.com/nats-io/nats.go/jetstream"

	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/internal/natstest"
	"github.com/eventhub/eventhub/jetstream"
	"github.com/eventhub/eventhub/ops"
)

type env struct {
	h    *ops.Handler
	bus  *jetstream.Bus
	js   njs.JetStream
	srv  *httptest.Server
	now  atomic.Pointer[time.Time]
	logs *logRecorder
}

// newEnv starts an embedded server, a bus on it, and the ops handler
// behind an httptest server. oc.Bus, oc.Now and oc.Logger are filled in.
func newEnv(t testing.TB, bc jetstream.Config, oc ops.Config) *env {
	t.Helper()
	srv := natstest.RunEmbedded(t)
	nc := natstest.InProcessConn(t, srv)
	bus, err := jetstream.New(nc, bc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bus.Close() })
	e := &env{bus: bus, js: bus.JetStream(), logs: &logRecorder{}}
	oc.Bus = bus.Admin()
	e.serve(t, oc)
	return e
}

// serve starts the ops handler with oc (Now and Logger filled in) behind
// an httptest server.
func (e *env) serve(t testing.TB, oc ops.Config) {
	t.Helper()
	oc.Now = func() time.Time {
		if p := e.now.Load(); p != nil {
			return *p
		}
		return time.Now()
	}
	oc.Logger = slog.New(e.logs)
	h, err := ops.New(oc)
	if err != nil {
		t.Fatal(err)
	}
	e.h = h
	e.srv = httptest.NewServer(h)
	t.Cleanup(e.srv.Close)
}

func (e *env) get(t testing.TB, path string) (int, []byte, http.Header) {
	t.Helper()
	return e.do(t, path, nil)
}

func (e *env) do(t testing.TB, path string, hdr http.Header) (int, []byte, http.Header) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, e.srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: read body: %v", path, err)
	}
	return resp.StatusCode, body, resp.Header
}

// getJSON GETs path, wants status 200 and decodes the body into v.
func (e *env) getJSON(t testing.TB, path string, v any) {
	t.Helper()
	status, body, hdr := e.get(t, path)
	if status != http.StatusOK {
		t.Fatalf("GET %s: status %d: %s", path, status, body)
	}
	if ct := hdr.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("GET %s: Content-Type %q", path, ct)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("GET %s: decode %s: %v", path, body, err)
	}
}

func publish(t testing.TB, b *jetstream.Bus, topic, payload, key string) *facade.EventRecord {
	t.Helper()
	e, err := b.Publish(t.Context(), topic, json.RawMessage(payload), facade.PublishOptions{Key: key})
	if err != nil {
		t.Fatalf("publish %s: %v", topic, err)
	}
	return e
}

// publishMany publishes n events asynchronously and waits for all of them.
func publishMany(t testing.TB, b *jetstream.Bus, topic string, n int, payload func(i int) string) {
	t.Helper()
	ctx := context.Background()
	futures := make([]facade.PublishFuture, 0, 1000)
	wait := func() {
		for _, f := range futures {
			if _, err := f.Wait(ctx); err != nil {
				t.Fatalf("publish %s: %v", topic, err)
			}
		}
		futures = futures[:0]
	}
	for i := range n {
		f, err := b.PublishAsync(ctx, topic, json.RawMessage(payload(i)), facade.PublishOptions{})
		if err != nil {
			t.Fatalf("publish %s: %v", topic, err)
		}
		futures = append(futures, f)
		if len(futures) == cap(futures) {
			wait()
		}
	}
	wait()
}

// decodeNDJSON decodes a replay body: every line must be exactly the
// json.Marshal of a facade.EventRecord (payloads here are compact and
// HTML-free, so the bytes must match).
func decodeNDJSON(t testing.TB, body []byte) []facade.EventRecord {
	t.Helper()
	var out []facade.EventRecord
	if len(body) == 0 {
		return out
	}
	if body[len(body)-1] != '\n' {
		t.Fatalf("replay body does not end with a newline: %q", tail(body))
	}
	for i, line := range bytes.Split(body[:len(body)-1], []byte("\n")) {
		var e facade.EventRecord
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&e); err != nil {
			t.Fatalf("line %d %q: %v", i+1, line, err)
		}
		again, err := json.Marshal(&e)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(again, line) {
			t.Fatalf("line %d is not json.Marshal of its record:\n got %s\nwant %s", i+1, line, again)
		}
		out = append(out, e)
	}
	return out
}

func tail(b []byte) []byte {
	if len(b) > 80 {
		return b[len(b)-80:]
	}
	return b
}

func seqsOf(es []facade.EventRecord) []uint64 {
	out := make([]uint64, len(es))
	for i, e := range es {
		out[i] = e.Seq
	}
	return out
}

func seqRange(from, to uint64) []uint64 {
	var out []uint64
	for s := from; s <= to; s++ {
		out = append(out, s)
	}
	return out
}

// logRecorder is a slog.Handler that keeps every record's message and
// attributes.
type logRecorder struct {
	mu      sync.Mutex
	records []logRecord
}

type logRecord struct {
	msg   string
	level slog.Level
	attrs map[string]string
}

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) WithAttrs(as []slog.Attr) slog.Handler {
	return &attrHandler{l, as}
}
func (l *logRecorder) WithGroup(string) slog.Handler { return l }
func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	return l.handle(r, nil)
}

func (l *logRecorder) handle(r slog.Record, pre []slog.Attr) error {
	rec := logRecord{msg: r.Message, level: r.Level, attrs: map[string]string{}}
	for _, a := range pre {
		rec.attrs[a.Key] = a.Value.String()
	}
	r.Attrs(func(a slog.Attr) bool {
		rec.attrs[a.Key] = a.Value.String()
		return true
	})
	l.mu.Lock()
	l.records = append(l.records, rec)
	l.mu.Unlock()
	return nil
}

// findAll returns every record with msg.
func (l *logRecorder) findAll(msg string) []logRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []logRecord
	for _, r := range l.records {
		if r.msg == msg {
			out = append(out, r)
		}
	}
	return out
}

// find returns the first record with msg.
func (l *logRecorder) find(msg string) (logRecord, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.records {
		if r.msg == msg {
			return r, nil
		}
	}
	var msgs []string
	for _, r := range l.records {
		msgs = append(msgs, r.msg)
	}
	return logRecord{}, fmt.Errorf("no log %q among [%s]", msg, strings.Join(msgs, "; "))
}

type attrHandler struct {
	l  *logRecorder
	as []slog.Attr
}

func (h *attrHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *attrHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &attrHandler{h.l, append(append([]slog.Attr{}, h.as...), as...)}
}
func (h *attrHandler) WithGroup(string) slog.Handler { return h }
func (h *attrHandler) Handle(_ context.Context, r slog.Record) error {
	return h.l.handle(r, h.as)
}

func newRecorder() *httptest.ResponseRecorder { return httptest.NewRecorder() }
