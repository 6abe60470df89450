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
// traces nothing unless OTEL_TRACES_EXPORTER says otherwise. A key set here
// wins over its OTEL_* environment variable; a key left unset falls back to
// the variable, which the OpenTelemetry SDK reads itself (so do the others
// it knows, such as OTEL_EXPORTER_OTLP_HEADERS and OTEL_RESOURCE_ATTRIBUTES).
type Config struct {
	// Exporter is "otlp" (trace, exporting over OTLP) or "none" (do not
	// trace). Unset: OTEL_TRACES_EXPORTER, else "none".
	Exporter string `yaml:"exporter"`
	// Endpoint is the OTLP/HTTP URL spans are sent to, such as
	// http://collector:4318 (the path /v1/traces is added when the URL has
	// none). Unset: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or
	// OTEL_EXPORTER_OTLP_ENDPOINT, else http://localhost:4318.
	Endpoint string `yaml:"endpoint"`
	// ServiceName is the service.name of the hub's spans. Unset:
	// OTEL_SERVICE_NAME, else "eventhub".
	ServiceName string `yaml:"serviceName"`
	// SampleRatio, when set (above 0, at most 1), samples that share of
	// the traces the hub starts, and follows the caller's decision for
	// traces it continues (parentbased_traceidratio). Unset:
	// OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG, else every trace
	// (parentbased_always_on).
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
	if exp == "" {
		exp = os.Getenv("OTEL_TRACES_EXPORTER")
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
	if c.Endpoint != "" {
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
	ropts := []resource.Option{
		resource.WithAttributes(attribute.String("service.name", "eventhub")),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES
		resource.WithTelemetrySDK(),
	}
	if c.ServiceName != "" {
		ropts = append(ropts, resource.WithAttributes(attribute.String("service.name", c.ServiceName)))
	}
	res, err := resource.New(ctx, ropts...)
	if err != nil {
		_ = exporter.Shutdown(ctx)
		return nil, fmt.Errorf("%w: resource: %w", ErrConfig, err)
	}
	popts := []sdktrace.TracerProviderOption{sdktrace.WithBatcher(exporter), sdktrace.WithResource(res)}
	if r := c.SampleRatio; r > 0 {
		popts = append(popts, sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(r))))
	}
	return sdktrace.NewTracerProvider(popts...), nil
}
