package hub_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/eventhub/eventhub/client"
	"github.com/eventhub/eventhub/facade"
	"github.com/eventhub/eventhub/hub"
	"github.com/eventhub/eventhub/internal/testutil"
	"github.com/eventhub/eventhub/tracing"
)

// tracedHub starts a hub that traces into an in-memory exporter.
func tracedHub(t *testing.T) (*hub.Hub, *sdktrace.TracerProvider, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return startHub(t, hub.Config{TracerProvider: tp}), tp, exp
}

// waitSpan waits for an ended span of that name and returns it.
func waitSpan(t *testing.T, exp *tracetest.InMemoryExporter, name string) tracetest.SpanStub {
	t.Helper()
	var got tracetest.SpanStub
	testutil.CheckFor(t, 5*time.Second, func() error {
		for _, s := range exp.GetSpans() {
			if s.Name == name {
				got = s
				return nil
			}
		}
		return fmt.Errorf("no span %q among %d", name, len(exp.GetSpans()))
	})
	return got
}

func wantAttrs(t *testing.T, s tracetest.SpanStub, want map[string]string) {
	t.Helper()
	have := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes {
		have[kv.Key] = kv.Value
	}
	for k, v := range want {
		if got := have[attribute.Key(k)].Emit(); got != v {
			t.Errorf("span %s: %s = %q, want %q", s.Name, k, got, v)
		}
	}
}

// TestTraceGoPublishToWebSocketConsumer: a publish through the Go API
// under a span of the caller's, delivered to a group over WebSocket, is
// one trace: caller → publish (producer) → deliver (consumer, settled by
// the client's ack) → the client handler's span.
func TestTraceGoPublishToWebSocketConsumer(t *testing.T) {
	h, tp, exp := tracedHub(t)
	c, err := client.Dial(t.Context(), "ws://"+h.Addr("ws"), client.Config{NoReconnect: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	handled := make(chan trace.SpanContext, 1)
	sub, err := c.Subscribe(t.Context(), "orders.traced", "billing", func(ctx context.Context, d facade.Delivery) error {
		_, span := tp.Tracer("consumer").Start(ctx, "handle")
		handled <- span.SpanContext()
		span.End()
		return nil
	}, facade.SubscribeOptions{From: facade.FromEarliest})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Stop(context.Background())

	ctx, root := tp.Tracer("producer").Start(t.Context(), "request")
	rec, err := h.Bus.Publish(ctx, "orders.traced", json.RawMessage(`{"n":1}`), facade.PublishOptions{})
	root.End()
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-handled:
	case <-time.After(10 * time.Second):
		t.Fatal("no delivery")
	}
	pub := waitSpan(t, exp, "publish orders.traced")
	del := waitSpan(t, exp, "deliver orders.traced") // ends with the client's ACK
	hd := waitSpan(t, exp, "handle")

	tid := root.SpanContext().TraceID()
	for _, s := range []tracetest.SpanStub{pub, del, hd} {
		if s.SpanContext.TraceID() != tid {
			t.Errorf("span %s in trace %s, want %s", s.Name, s.SpanContext.TraceID(), tid)
		}
	}
	if pub.Parent.SpanID() != root.SpanContext().SpanID() || pub.SpanKind != trace.SpanKindProducer {
		t.Errorf("publish: parent %s kind %s, want %s producer", pub.Parent.SpanID(), pub.SpanKind, root.SpanContext().SpanID())
	}
	if del.Parent.SpanID() != pub.SpanContext.SpanID() || del.SpanKind != trace.SpanKindConsumer {
		t.Errorf("deliver: parent %s kind %s, want %s consumer", del.Parent.SpanID(), del.SpanKind, pub.SpanContext.SpanID())
	}
	if hd.Parent.SpanID() != del.SpanContext.SpanID() || !hd.Parent.IsRemote() {
		t.Errorf("handler: parent %s (remote %t), want the deliver span %s", hd.Parent.SpanID(), hd.Parent.IsRemote(), del.SpanContext.SpanID())
	}
	wantAttrs(t, pub, map[string]string{"messaging.system": "nats", "messaging.destination.name": "orders.traced",
		"messaging.message.id": rec.ID, "messaging.operation.type": "send"})
	wantAttrs(t, del, map[string]string{"messaging.system": "nats", "messaging.destination.name": "orders.traced",
		"messaging.message.id": rec.ID, "messaging.consumer.group.name": "billing", "messaging.operation.type": "process"})
	if len(del.Events) != 1 || del.Events[0].Name != "ack" {
		t.Errorf("deliver span events %+v, want one ack", del.Events)
	}
}

// TestTraceHTTPTraceparentToNativeConsumer: the traceparent of an HTTP
// publish is the publish span's parent, and a plain nats.go subscriber
// finds the publish span's context in the message's traceparent header.
func TestTraceHTTPTraceparentToNativeConsumer(t *testing.T) {
	h, _, exp := tracedHub(t)
	nc, err := nats.Connect(h.Bus.Server().ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ns, err := nc.SubscribeSync("orders.http")
	if err != nil {
		t.Fatal(err)
	}
	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+h.Addr("http")+"/publish/orders.http", strings.NewReader(`{"n":1}`))
	req.Header.Set("Traceparent", parent)
	req.Header.Set("Tracestate", "vendor=abc")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("publish: %s", resp.Status)
	}
	msg, err := ns.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	pub := waitSpan(t, exp, "publish orders.http")
	if got := pub.Parent.SpanID().String(); got != "00f067aa0ba902b7" || !pub.Parent.IsRemote() {
		t.Errorf("publish span's parent %s (remote %t), want the request's", got, pub.Parent.IsRemote())
	}
	want := "00-4bf92f3577b34da6a3ce929d0e0e4736-" + pub.SpanContext.SpanID().String() + "-01"
	if got := msg.Header.Get("traceparent"); got != want {
		t.Errorf("native traceparent %q, want %q", got, want)
	}
	if got := msg.Header.Get("tracestate"); got != "vendor=abc" {
		t.Errorf("native tracestate %q, want vendor=abc", got)
	}

	// A traceparent that is not valid is ignored: the publish starts a trace.
	exp.Reset()
	req, _ = http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+h.Addr("http")+"/publish/orders.http", strings.NewReader(`2`))
	req.Header.Set("Traceparent", "00-not-a-trace-01")
	if resp, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("publish with a bad traceparent: %s", resp.Status)
	}
	if msg, err = ns.NextMsg(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	pub = waitSpan(t, exp, "publish orders.http")
	if pub.Parent.IsValid() || msg.Header.Get("traceparent") != facade.TraceOf(pub.SpanContext).Traceparent {
		t.Errorf("bad traceparent: publish span's parent %v, native traceparent %q", pub.Parent, msg.Header.Get("traceparent"))
	}
}

// TestTracingOffAddsNothing: without tracing, a publish under a caller's
// span stores no trace header, and the EVENT frame is as it always was.
func TestTracingOffAddsNothing(t *testing.T) {
	t.Setenv("OTEL_TRACES_EXPORTER", "")
	h := startHub(t, hub.Config{})
	nc, err := nats.Connect(h.Bus.Server().ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ns, err := nc.SubscribeSync("orders.off")
	if err != nil {
		t.Fatal(err)
	}
	ws, _, err := websocket.DefaultDialer.DialContext(t.Context(), "ws://"+h.Addr("ws"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	for _, f := range []string{`{"op":"AUTH","token":"any","corr":"1"}`,
		`{"op":"SUBSCRIBE","topic":"orders.off","group":"g","corr":"2","opts":{"from":"earliest"}}`} {
		_ = ws.WriteMessage(websocket.TextMessage, []byte(f))
		if _, b, err := ws.ReadMessage(); err != nil || !strings.Contains(string(b), `"OK"`) {
			t.Fatalf("%s: %s %v", f, b, err)
		}
	}

	tp := sdktrace.NewTracerProvider() // the caller traces, the hub does not
	defer tp.Shutdown(context.Background())
	ctx, span := tp.Tracer("caller").Start(t.Context(), "request")
	defer span.End()
	if _, err := h.Bus.Publish(ctx, "orders.off", json.RawMessage(`{"n":1}`), facade.PublishOptions{}); err != nil {
		t.Fatal(err)
	}
	msg, err := ns.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for k := range msg.Header {
		if strings.EqualFold(k, "traceparent") || strings.EqualFold(k, "tracestate") {
			t.Errorf("header %s stored with tracing off", k)
		}
	}
	_ = ws.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, frame, err := ws.ReadMessage()
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^\{"op":"EVENT","topic":"orders\.off","group":"g","event":\{[^{}]*\{"n":1\}[^{}]*\},"ctx":\{"attempt":1,"ack_deadline_ms":\d+\}\}$`).Match(frame) {
		t.Errorf("EVENT frame %s", frame)
	}
}

// TestTraceGoClientPublishAndDeadLetter: a publish from the Go client
// under a span continues its trace (PUBLISH carries it); a Go API handler
// runs under the deliver span, whose events tell a nack and the dead
// letter, and the dead letter's publish is the deliver span's child.
func TestTraceGoClientPublishAndDeadLetter(t *testing.T) {
	h, tp, exp := tracedHub(t)
	c, err := client.Dial(t.Context(), "ws://"+h.Addr("ws"), client.Config{NoReconnect: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	inHandler := make(chan trace.SpanContext, 2)
	sub, err := h.Bus.Subscribe(t.Context(), "orders.fail", "billing", func(ctx context.Context, d facade.Delivery) error {
		inHandler <- trace.SpanContextFromContext(ctx)
		return fmt.Errorf("boom")
	}, facade.SubscribeOptions{From: facade.FromEarliest, MaxAttempts: 2, Retry: &facade.RetryPolicy{MinBackoffMs: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Stop(context.Background())

	ctx, root := tp.Tracer("producer").Start(t.Context(), "request")
	if _, err := c.Publish(ctx, "orders.fail", json.RawMessage(`1`), facade.PublishOptions{}); err != nil {
		t.Fatal(err)
	}
	root.End()
	pub := waitSpan(t, exp, "publish orders.fail")
	if pub.Parent.SpanID() != root.SpanContext().SpanID() || pub.SpanContext.TraceID() != root.SpanContext().TraceID() {
		t.Errorf("publish span's parent %s, want the client's span %s", pub.Parent.SpanID(), root.SpanContext().SpanID())
	}
	dl := waitSpan(t, exp, "publish orders.fail.dlq")
	var events []string
	var dlParent bool
	for _, s := range exp.GetSpans() {
		if s.Name != "deliver orders.fail" {
			continue
		}
		if s.Parent.SpanID() != pub.SpanContext.SpanID() {
			t.Errorf("deliver span's parent %s, want the publish span", s.Parent.SpanID())
		}
		for _, e := range s.Events {
			events = append(events, e.Name)
		}
		dlParent = dlParent || dl.Parent.SpanID() == s.SpanContext.SpanID()
		if hc := <-inHandler; hc.SpanID() != s.SpanContext.SpanID() {
			t.Errorf("handler ctx span %s, want the deliver span %s", hc.SpanID(), s.SpanContext.SpanID())
		}
	}
	if strings.Join(events, ",") != "nack,dead_letter" {
		t.Errorf("deliver span events %v, want nack then dead_letter", events)
	}
	if !dlParent {
		t.Errorf("the dead letter's publish span is not a deliver span's child")
	}
}

// TestTraceLiveAndSSE: live subscribers, over WebSocket (the Go client's
// Follow) and SSE, get the trace context the event was published with.
func TestTraceLiveAndSSE(t *testing.T) {
	h, tp, exp := tracedHub(t)
	ctx, root := tp.Tracer("producer").Start(t.Context(), "request")
	if _, err := h.Bus.Publish(ctx, "orders.live", json.RawMessage(`{"n":1}`), facade.PublishOptions{}); err != nil {
		t.Fatal(err)
	}
	root.End()
	pub := waitSpan(t, exp, "publish orders.live")
	want := facade.TraceOf(pub.SpanContext)

	c, err := client.Dial(t.Context(), "ws://"+h.Addr("ws"), client.Config{NoReconnect: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got := make(chan *facade.TraceContext, 1)
	fsub, err := c.Follow(t.Context(), "orders.live", 0, func(e *facade.EventRecord) { got <- e.Trace })
	if err != nil {
		t.Fatal(err)
	}
	defer fsub.Stop(context.Background())
	select {
	case tc := <-got:
		if tc == nil || *tc != want {
			t.Errorf("live event's trace %+v, want %+v", tc, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no live event")
	}

	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+h.Addr("http")+"/sse/orders.live?since=0", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok && strings.Contains(data, `"id"`) {
			var e struct{ Trace facade.TraceContext }
			if err := json.Unmarshal([]byte(data), &e); err != nil || e.Trace != want {
				t.Errorf("SSE data %s: trace %+v (%v), want %+v", data, e.Trace, err, want)
			}
			return
		}
	}
	t.Fatalf("no SSE event: %v", sc.Err())
}

// TestHubExportsTracesOverOTLP: a hub configured with the tracing section
// exports its spans to the OTLP endpoint, the last ones when it shuts down.
func TestHubExportsTracesOverOTLP(t *testing.T) {
	t.Setenv("OTEL_TRACES_EXPORTER", "")
	var exports atomic.Int64
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/v1/traces" && r.ContentLength != 0 {
			exports.Add(1)
		}
	}))
	defer collector.Close()
	h, err := hub.Start(t.Context(), hub.Config{NATS: hub.NATSConfig{DataDir: t.TempDir()},
		Tracing: tracing.Config{Exporter: "otlp", Endpoint: collector.URL}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Bus.Publish(t.Context(), "orders.otlp", json.RawMessage(`1`), facade.PublishOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := h.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	if exports.Load() == 0 {
		t.Error("the hub exported no spans to its OTLP endpoint")
	}
}
