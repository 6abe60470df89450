// Package tracing builds the hub's OpenTelemetry tracer provider from the
// tracing section of the configuration file and the standard OTEL_*
// environment variables. Tracing is off unless an exporter is chosen; the
// provider then exports spans over OTLP (HTTP/protobuf).
//
// The spans themselves are made where the work is (publish and deliver in
// package jetstream); see docs/tracing.md.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// ErrConfig is wrapped by the errors of a setting, from the file or the
// environment, that tracing cannot use.
var ErrConfig = errors.New("tracing")

// Config is the tracing section of the configuration file. The zero value
// traces nothing unless OTEL_TRACES_EXPORTER says otherwise. As with every
// setting of the hub, an environment variable wins over the file: each key
// applies only while its OTEL_* variable is unset. The OpenTelemetry SDK
// reads the variables itself, the others it knows too (such as
// OTEL_EXPORTER_OTLP_HEADERS and OTEL_RESOURCE_ATTRIBUTES).
type Config struct {
	// Exporter is "otlp" (trace, exporting over OTLP) or "none" (do not
	// trace, the default). $OTEL_TRACES_EXPORTER.
	Exporter string `yaml:"exporter"`
	// Endpoint is the OTLP/HTTP URL spans are sent to, such as
	// http://collector:4318 (the path /v1/traces is added when the URL has
	// none); default http://localhost:4318.
	// $OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, $OTEL_EXPORTER_OTLP_ENDPOINT.
	Endpoint string `yaml:"endpoint"`
	// ServiceName is the service.name of the hub's spans (default
	// "eventhub"). $OTEL_SERVICE_NAME.
	ServiceName string `yaml:"serviceName"`
	// SampleRatio, when set (above 0, at most 1), samples that share of
	// the traces the hub starts, and follows the caller's decision for
	// traces it continues (parentbased_traceidratio). Unset, every trace
	// is sampled (parentbased_always_on). $OTEL_TRACES_SAMPLER,
	// $OTEL_TRACES_SAMPLER_ARG.
	SampleRatio float64 `yaml:"sampleRatio"`
}

// Validate reports the first setting of the file that cannot work,
// wrapping [ErrConfig].
func (c Config) Validate() error {
	switch c.Exporter {
	case "", "none", "otlp":
	default:
		return fmt.Errorf("%w: exporter %q (tracing.exporter): want otlp or none", ErrConfig, c.Exporter)
	}
	if c.Endpoint != "" {
		if u, err := url.Parse(c.Endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("%w: endpoint %q (tracing.endpoint): want an http:// or https:// URL", ErrConfig, c.Endpoint)
		}
	}
	if c.SampleRatio < 0 || c.SampleRatio > 1 {
		return fmt.Errorf("%w: sampleRatio %v (tracing.sampleRatio): want above 0, at most 1", ErrConfig, c.SampleRatio)
	}
	return nil
}

// exporter is the exporter c chooses, the environment's when c has none.
func (c Config) exporter() (string, error) {
	exp := c.Exporter
	if v := os.Getenv("OTEL_TRACES_EXPORTER"); v != "" {
		exp = v
	}
	switch exp {
	case "", "none":
		return "", nil
	case "otlp":
	default:
		return "", fmt.Errorf("%w: exporter %q (OTEL_TRACES_EXPORTER): want otlp or none", ErrConfig, exp)
	}
	p := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if p == "" {
		p = os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	if p != "" && p != "http/protobuf" {
		return "", fmt.Errorf("%w: OTLP protocol %q (OTEL_EXPORTER_OTLP_PROTOCOL): the hub exports http/protobuf", ErrConfig, p)
	}
	return exp, nil
}

// New returns the tracer provider c and the environment ask for, or nil
// when tracing is off. The caller owns it: its Shutdown flushes the spans
// not yet exported and stops the exporter. Creating it does not connect
// to the endpoint; spans that cannot be exported are dropped (the SDK
// logs why).
func New(ctx context.Context, c Config) (*sdktrace.TracerProvider, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	exp, err := c.exporter()
	if err != nil || exp == "" {
		return nil, err
	}
	var opts []otlptracehttp.Option
	if c.Endpoint != "" && os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" && os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" {
		u, _ := url.Parse(c.Endpoint) // checked by Validate
		if u.Path == "" || u.Path == "/" {
			u.Path = "/v1/traces" // as for OTEL_EXPORTER_OTLP_ENDPOINT
		}
		opts = append(opts, otlptracehttp.WithEndpointURL(u.String()))
	}
	exporter, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("%w: OTLP exporter: %w", ErrConfig, err)
	}
	name := c.ServiceName
	if name == "" {
		name = "eventhub"
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", name)),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES: later, so they win
		resource.WithTelemetrySDK(),
	)
	if err != nil {
		_ = exporter.Shutdown(ctx)
		return nil, fmt.Errorf("%w: resource: %w", ErrConfig, err)
	}
	popts := []sdktrace.TracerProviderOption{sdktrace.WithBatcher(exporter), sdktrace.WithResource(res)}
	if r := c.SampleRatio; r > 0 && os.Getenv("OTEL_TRACES_SAMPLER") == "" {
		popts = append(popts, sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(r))))
	}
	return sdktrace.NewTracerProvider(popts...), nil
}
