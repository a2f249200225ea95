package bus

import (
	"context"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/cloudevents/sdk-go/v2/extensions"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Every event carries the W3C trace context of the span that sent it in
// the CloudEvents distributed tracing extension (ce-traceparent and
// ce-tracestate): the receiver continues the trace from it, so one change
// of a parent is one trace across the watcher, the hook and the applier.
//
// OpenTelemetry's TraceContext propagator reads and writes the context; the
// CloudEvents SDK's extension type carries it on the event. (The CloudEvents
// SDK's OpenTelemetry module does the same but brings zap and otelhttp,
// which the Go hook SDK, built on this package, must not depend on.)

// InjectTrace sets the event's distributed tracing extension to the span
// of ctx. A ctx without a span context leaves the event without one.
func InjectTrace(ctx context.Context, e *event.Event) {
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, carrier)
	extensions.DistributedTracingExtension{
		TraceParent: carrier.Get(extensions.TraceParentExtension),
		TraceState:  carrier.Get(extensions.TraceStateExtension),
	}.AddTracingAttributes(e)
}

// ExtractTrace returns ctx with the span context of the event's
// distributed tracing extension as its remote parent, or ctx unchanged when
// the event has none (an event from a worker that does not pass it on).
func ExtractTrace(ctx context.Context, e *event.Event) context.Context {
	ext, ok := extensions.GetDistributedTracingExtension(*e)
	if !ok {
		return ctx
	}
	return propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{
		extensions.TraceParentExtension: ext.TraceParent,
		extensions.TraceStateExtension:  ext.TraceState,
	})
}

// The spans on either side of the bus — uc's roles' (internal/tracing) and
// the Go hook SDK's — are made with the OpenTelemetry API alone, with the
// helpers below, and carry the same attributes: the process's main picks
// the TracerProvider, and without one the API's default does nothing.

// TraceScope is the instrumentation scope of uc's spans.
const TraceScope = "universalcontroller.dev/uc"

// Tracer is uc's tracer of tp, or of the global TracerProvider when tp is
// nil.
func Tracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return tp.Tracer(TraceScope)
}

// EndSpan ends span, with err as its status when it is not nil.
func EndSpan(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// SetSpanAttributes gives span the attributes attrs makes, if it is
// recorded: when tracing is off, attributes cost nothing.
func SetSpanAttributes(span trace.Span, attrs func() []attribute.KeyValue) {
	if span.IsRecording() {
		span.SetAttributes(attrs()...)
	}
}

// Waited records the time an event sent at sent waited on the bus until
// now, as a span named name under the event's span (the remote parent in
// ctx, see ExtractTrace), with the attributes attrs makes. Without a time
// or a parent there is nothing to record.
func Waited(ctx context.Context, tracer trace.Tracer, name string, sent time.Time, attrs func() []attribute.KeyValue) {
	if sent.IsZero() || !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	_, span := tracer.Start(ctx, name, trace.WithTimestamp(sent))
	SetSpanAttributes(span, attrs)
	span.End()
}

// Attribute keys of uc's spans.
const (
	AttrController  = attribute.Key("uc.controller")
	AttrHook        = attribute.Key("uc.hook")
	AttrParent      = attribute.Key("uc.parent")
	AttrParentUID   = attribute.Key("uc.parent.uid")
	AttrObservation = attribute.Key("uc.observation")
	AttrPartition   = attribute.Key("uc.partition")
)

// SpanAttributes are the attributes of a span about the parent m
// concerns.
func (m Meta) SpanAttributes() []attribute.KeyValue {
	return []attribute.KeyValue{
		AttrController.String(m.Controller),
		AttrHook.String(m.Hook),
		AttrParent.String(m.Key()),
		AttrParentUID.String(string(m.ParentUID)),
		AttrObservation.Int64(m.Observation),
		AttrPartition.Int(m.Partition),
	}
}
