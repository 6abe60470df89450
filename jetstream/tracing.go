package jetstream

import (
	"context"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/eventhub/eventhub/facade"
)

// Header names of the W3C trace context an event carries (see
// [facade.TraceContext]): the names OpenTelemetry's propagators use, so
// NATS clients find them where they look.
const (
	HeaderTraceparent = "traceparent"
	HeaderTracestate  = "tracestate"
)

// tracerName is the instrumentation scope of the bus's spans.
const tracerName = "github.com/eventhub/eventhub/jetstream"

// Attributes of the OpenTelemetry messaging conventions.
var (
	attrSystem      = attribute.String("messaging.system", "nats")
	attrSend        = attribute.String("messaging.operation.type", "send")
	attrPublish     = attribute.String("messaging.operation.name", "publish")
	attrProcess     = attribute.String("messaging.operation.type", "process")
	attrDeliver     = attribute.String("messaging.operation.name", "deliver")
	keyDestination  = attribute.Key("messaging.destination.name")
	keyGroup        = attribute.Key("messaging.consumer.group.name")
	keyMessageID    = attribute.Key("messaging.message.id")
	keyBodySize     = attribute.Key("messaging.message.body.size")
	keySeq          = attribute.Key("messaging.nats.stream.sequence")
	keyAttempt      = attribute.Key("messaging.nats.delivery.attempt")
	keyReason       = attribute.Key("messaging.nats.nack.reason")
	keyKey          = attribute.Key("messaging.nats.message.key")
	keyDeadLetterTo = attribute.Key("messaging.nats.dead_letter.destination")
)

// startPublish starts the producer span of a publish of e, a child of
// ctx's span, and stores its context in msg's headers; nil when the bus
// does not trace. The store is part of the span: it ends with the store's
// acknowledgement (see endSpan).
func (b *Bus) startPublish(ctx context.Context, e *facade.EventRecord, msg *nats.Msg) trace.Span {
	if b.tracer == nil {
		return nil
	}
	attrs := []attribute.KeyValue{attrSystem, attrSend, attrPublish,
		keyDestination.String(e.Topic), keyBodySize.Int(len(e.Payload))}
	if e.ID != "" { // else known once stored (see endPublish)
		attrs = append(attrs, keyMessageID.String(e.ID))
	}
	if e.Key != "" {
		attrs = append(attrs, keyKey.String(e.Key))
	}
	_, span := b.tracer.Start(ctx, "publish "+e.Topic, trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(attrs...))
	setTraceHeaders(msg.Header, facade.TraceOf(span.SpanContext()))
	return span
}

// setTraceHeaders stores tc in h (nothing when tc is zero).
func setTraceHeaders(h nats.Header, tc facade.TraceContext) {
	if tc.Traceparent == "" {
		return
	}
	h[HeaderTraceparent] = []string{tc.Traceparent}
	if tc.Tracestate != "" {
		h[HeaderTracestate] = []string{tc.Tracestate}
	}
}

// traceFrom returns the trace context stored in h; nil when it has none.
func traceFrom(h nats.Header) *facade.TraceContext {
	tp := h.Get(HeaderTraceparent)
	if tp == "" {
		return nil
	}
	return &facade.TraceContext{Traceparent: tp, Tracestate: h.Get(HeaderTracestate)}
}

// endPublish ends a publish span (nil: nothing), with the stored event e
// (its position, and its id when the store's position made it) or the
// error.
func endPublish(span trace.Span, e *facade.EventRecord, err error) {
	if span == nil {
		return
	}
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	} else {
		span.SetAttributes(keySeq.Int64(int64(e.Seq)), keyMessageID.String(e.ID))
	}
	span.End()
}

// startDeliver starts d's consumer span, a child of the context its event
// was published with, when the bus traces; the record then carries the
// span's context to the handler (and over WebSocket to the client).
func (s *subscription) startDeliver(d *delivery) {
	t := s.b.tracer
	if t == nil {
		return
	}
	ctx := context.Background()
	if d.rec.Trace != nil {
		ctx = facade.ContextWithTrace(ctx, *d.rec.Trace)
	}
	_, d.span = t.Start(ctx, "deliver "+d.rec.Topic, trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(
		attrSystem, attrProcess, attrDeliver, keyDestination.String(d.rec.Topic), keyGroup.String(s.group),
		keyMessageID.String(d.rec.ID), keySeq.Int64(int64(d.rec.Seq)), keyAttempt.Int(d.attempt)))
	tc := facade.TraceOf(d.span.SpanContext())
	d.rec.Trace = &tc
}

// handlerContext is the context d's handler runs with: the subscription's,
// carrying d's span, or the trace context its event was published with.
func (d *delivery) handlerContext(ctx context.Context) context.Context {
	if d.span != nil {
		return trace.ContextWithSpan(ctx, d.span)
	}
	if d.rec.Trace != nil {
		return facade.ContextWithTrace(ctx, *d.rec.Trace)
	}
	return ctx
}

// endSpan ends d's span (if it has one) with the event of how it was
// settled: ack, nack, dead_letter, release, expired, handed_back.
func (d *delivery) endSpan(how string, attrs ...attribute.KeyValue) {
	if d.span == nil {
		return
	}
	d.span.AddEvent(how, trace.WithAttributes(attrs...))
	d.span.End()
}
