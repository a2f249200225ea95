// Package tracing is what uc's components share to trace one change of a
// parent with OpenTelemetry, from the watcher's sync through the bus and
// the hook to the applier's writes. The spans are made with the
// OpenTelemetry API alone: the process's main picks the TracerProvider
// (internal/tracing/otlp for uc's own processes), and without one the
// API's default does nothing.
//
// The helpers themselves are the bus contract's (schemas/bus, trace.go),
// which the Go hook SDK uses too, so that the spans on both sides of the
// bus are made and named alike; this package gives them uc's own names.
package tracing

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"universalcontroller.dev/uc/schemas/bus"
)

// Scope is the instrumentation scope of uc's spans.
const Scope = bus.TraceScope

// Tracer is uc's tracer of tp, or of the global TracerProvider when tp is
// nil.
func Tracer(tp trace.TracerProvider) trace.Tracer { return bus.Tracer(tp) }

// End ends span, with err as its status when it is not nil.
func End(span trace.Span, err error) { bus.EndSpan(span, err) }

// SetAttributes gives span the attributes attrs makes, if it is recorded:
// when tracing is off, attributes cost nothing.
func SetAttributes(span trace.Span, attrs func() []attribute.KeyValue) {
	bus.SetSpanAttributes(span, attrs)
}

// Waited records the time an event sent at sent waited on the bus until
// now (bus.Waited).
func Waited(ctx context.Context, tracer trace.Tracer, name string, sent time.Time, attrs func() []attribute.KeyValue) {
	bus.Waited(ctx, tracer, name, sent, attrs)
}

// Attribute keys of uc's spans.
const (
	KeyController  = bus.AttrController
	KeyHook        = bus.AttrHook
	KeyParent      = bus.AttrParent
	KeyParentUID   = bus.AttrParentUID
	KeyObservation = bus.AttrObservation
	KeyPartition   = bus.AttrPartition
)

// Parent are the attributes of a span about the parent an event concerns.
func Parent(m bus.Meta) []attribute.KeyValue { return m.SpanAttributes() }
