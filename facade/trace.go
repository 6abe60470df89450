package facade

import (
	"context"
	"encoding/hex"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// TraceContext is the W3C trace context (https://www.w3.org/TR/trace-context/)
// an event carries: the span it was published under, or the hub's span
// that delivers it. It is stored with the event as the NATS headers
// traceparent and tracestate; its JSON form is the "trace" of a PUBLISH
// frame and of an EVENT frame's ctx.
type TraceContext struct {
	Traceparent string `json:"traceparent,omitempty"`
	Tracestate  string `json:"tracestate,omitempty"`
}

// ContextWithTrace returns ctx with tc as its remote parent span, as
// OpenTelemetry's propagators do: a span started from the returned context
// continues tc's trace. ctx is returned as it is when tc has no valid
// traceparent.
func ContextWithTrace(ctx context.Context, tc TraceContext) context.Context {
	if tc.Traceparent == "" {
		return ctx
	}
	c := propagation.MapCarrier{"traceparent": tc.Traceparent}
	if tc.Tracestate != "" {
		c["tracestate"] = tc.Tracestate
	}
	return propagation.TraceContext{}.Extract(ctx, c)
}

// TraceFromContext returns the trace context of ctx's span (one of the
// caller's, or a remote parent set by [ContextWithTrace]); zero when ctx
// has no valid span.
func TraceFromContext(ctx context.Context) TraceContext {
	return TraceOf(trace.SpanContextFromContext(ctx))
}

// TraceOf returns the trace context of sc; zero when sc is not valid.
func TraceOf(sc trace.SpanContext) TraceContext {
	if !sc.IsValid() {
		return TraceContext{}
	}
	// version 00, trace id, span id, flags: 2+1+32+1+16+1+2 bytes.
	var b [55]byte
	b[0], b[1], b[2] = '0', '0', '-'
	tid, sid := sc.TraceID(), sc.SpanID()
	hex.Encode(b[3:35], tid[:])
	b[35] = '-'
	hex.Encode(b[36:52], sid[:])
	b[52] = '-'
	hex.Encode(b[53:55], []byte{byte(sc.TraceFlags() & trace.FlagsSampled)})
	tc := TraceContext{Traceparent: string(b[:])}
	if ts := sc.TraceState(); ts.Len() > 0 {
		tc.Tracestate = ts.String()
	}
	return tc
}
