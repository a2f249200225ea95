// Package tracing is what uc's components share to trace one change of a
// parent with OpenTelemetry, from the watcher's sync through the bus and
// the hook to the applier's writes. The spans are made with the
// OpenTelemetry API alone: the process's main picks the TracerProvider
// (internal/tracing/otlp for uc's own processes), and without one the
// API's default does nothing.
package tracing

import (
	"context"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"universalcontroller.dev/uc/schemas/bus"
)

// Scope is the instrumentation scope of uc's spans.
const Scope = "universalcontroller.dev/uc"

// Tracer is uc's tracer of tp, or of the global TracerProvider when tp is
// nil.
func Tracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return tp.Tracer(Scope)
}

// End ends span, with err as its status when it is not nil.
func End(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// SetAttributes gives span the attributes attrs makes, if it is recorded:
// when tracing is off, attributes cost nothing.
func SetAttributes(span trace.Span, attrs func() []attribute.KeyValue) {
	if span.IsRecording() {
		span.SetAttributes(attrs()...)
	}
}

// Waited records the time an event sent at sent waited on the bus until
// now, as a span named name under the event's span (the remote parent in
// ctx, see bus.ExtractTrace), with the attributes attrs makes. Without a
// time or a parent there is nothing to record.
func Waited(ctx context.Context, tracer trace.Tracer, name string, sent time.Time, attrs func() []attribute.KeyValue) {
	if sent.IsZero() || !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	_, span := tracer.Start(ctx, name, trace.WithTimestamp(sent))
	SetAttributes(span, attrs)
	span.End()
}

// Attribute keys of uc's spans.
const (
	KeyController  = attribute.Key("uc.controller")
	KeyHook        = attribute.Key("uc.hook")
	KeyParent      = attribute.Key("uc.parent")
	KeyParentUID   = attribute.Key("uc.parent.uid")
	KeyObservation = attribute.Key("uc.observation")
	KeyPartition   = attribute.Key("uc.partition")
)

// Parent are the attributes of a span about the parent an event concerns.
func Parent(m bus.Meta) []attribute.KeyValue {
	return []attribute.KeyValue{
		KeyController.String(m.Controller),
		KeyHook.String(m.Hook),
		KeyParent.String(m.Key()),
		KeyParentUID.String(string(m.ParentUID)),
		KeyObservation.Int64(m.Observation),
		KeyPartition.Int(m.Partition),
	}
}
