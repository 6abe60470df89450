package tracing_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/eventhub/eventhub/internal/testutil"
	"github.com/eventhub/eventhub/tracing"
)

func TestMain(m *testing.M) {
	os.Exit(testutil.RunCheckingLeaks(m, 10*time.Second, "go.opentelemetry.io/otel", "github.com/eventhub/eventhub/"))
}

// collector is an OTLP/HTTP endpoint that keeps the spans it receives.
type collector struct {
	*httptest.Server
	mu    sync.Mutex
	spans []string // service.name/span name
}

func newCollector(t *testing.T) *collector {
	c := &collector{}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req coltracepb.ExportTraceServiceRequest
		if r.URL.Path != "/v1/traces" || proto.Unmarshal(body, &req) != nil {
			http.Error(w, "bad export", http.StatusBadRequest)
			return
		}
		c.mu.Lock()
		for _, rs := range req.ResourceSpans {
			svc := ""
			for _, kv := range rs.GetResource().GetAttributes() {
				if kv.Key == "service.name" {
					svc = kv.GetValue().GetStringValue()
				}
			}
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					c.spans = append(c.spans, svc+"/"+s.Name)
				}
			}
		}
		c.mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	t.Cleanup(c.Close)
	return c
}

func (c *collector) got() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.spans...)
}

// export makes one span with the provider cfg gives and shuts it down
// (which exports it); false when cfg turns tracing off.
func export(t *testing.T, cfg tracing.Config) bool {
	t.Helper()
	tp, err := tracing.New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if tp == nil {
		return false
	}
	_, span := tp.Tracer("test").Start(t.Context(), "op")
	span.End()
	if err := tp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	return true
}

func TestConfigFileExportsOverOTLP(t *testing.T) {
	c := newCollector(t)
	for _, k := range []string{"OTEL_TRACES_EXPORTER", "OTEL_SERVICE_NAME", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_TRACES_SAMPLER"} {
		t.Setenv(k, "")
	}
	if !export(t, tracing.Config{Exporter: "otlp", Endpoint: c.URL, ServiceName: "hub-a", SampleRatio: 1}) {
		t.Fatal("tracing off")
	}
	if got := c.got(); len(got) != 1 || got[0] != "hub-a/op" {
		t.Errorf("exported %v, want [hub-a/op]", got)
	}
	// A tiny sampleRatio: the trace the hub starts is not sampled.
	export(t, tracing.Config{Exporter: "otlp", Endpoint: c.URL, SampleRatio: 1e-12})
	if got := c.got(); len(got) != 1 {
		t.Errorf("exported %v with sampleRatio 1e-12", got)
	}
}

func TestEnvironmentConfiguresTracing(t *testing.T) {
	c := newCollector(t)
	t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", c.URL)
	t.Setenv("OTEL_SERVICE_NAME", "from-env")
	t.Setenv("OTEL_TRACES_SAMPLER", "")
	// The variables win over the file's keys, as every variable of the hub does.
	if !export(t, tracing.Config{Exporter: "none", Endpoint: "http://127.0.0.1:1", ServiceName: "from-file"}) {
		t.Fatal("OTEL_TRACES_EXPORTER=otlp did not turn tracing on")
	}
	if got := c.got(); len(got) != 1 || got[0] != "from-env/op" {
		t.Errorf("exported %v, want [from-env/op]", got)
	}
	// The traces' own endpoint variable, and the sampler's.
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", c.URL+"/v1/traces")
	export(t, tracing.Config{Endpoint: "http://127.0.0.1:1"})
	t.Setenv("OTEL_TRACES_SAMPLER", "always_off")
	export(t, tracing.Config{SampleRatio: 1})
	t.Setenv("OTEL_TRACES_SAMPLER", "")
	if got := c.got(); len(got) != 2 {
		t.Errorf("exported %v, want 2 spans: one to OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, none with OTEL_TRACES_SAMPLER=always_off", got)
	}
	t.Setenv("OTEL_TRACES_EXPORTER", "none")
	if export(t, tracing.Config{Exporter: "otlp"}) {
		t.Error("OTEL_TRACES_EXPORTER=none did not win over the file")
	}
	t.Setenv("OTEL_TRACES_EXPORTER", "")
	t.Setenv("OTEL_SERVICE_NAME", "")
	export(t, tracing.Config{Exporter: "otlp"}) // to the variable's endpoint
	if got := c.got(); len(got) != 3 || got[2] != "eventhub/op" {
		t.Errorf("exported %v, want eventhub as the default service name", got)
	}
}

func TestTracingIsOffByDefault(t *testing.T) {
	t.Setenv("OTEL_TRACES_EXPORTER", "")
	if export(t, tracing.Config{}) {
		t.Error("tracing on without configuration")
	}
}

func TestBadTracingConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  tracing.Config
		env  map[string]string
	}{
		{"exporter", tracing.Config{Exporter: "jaeger"}, nil},
		{"endpoint", tracing.Config{Exporter: "otlp", Endpoint: "collector:4318"}, nil},
		{"ratio", tracing.Config{SampleRatio: 1.5}, nil},
		{"env exporter", tracing.Config{}, map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}},
		{"grpc", tracing.Config{Exporter: "otlp"}, map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("OTEL_TRACES_EXPORTER", "")
			t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "")
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			tp, err := tracing.New(t.Context(), tc.cfg)
			if !errors.Is(err, tracing.ErrConfig) {
				t.Errorf("New: %v, want ErrConfig", err)
			}
			if tp != nil {
				_ = tp.Shutdown(context.Background())
			}
		})
	}
}
