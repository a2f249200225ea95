package bus

import (
	"context"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/cloudevents/sdk-go/v2/extensions"
	"go.opentelemetry.io/otel/propagation"
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
