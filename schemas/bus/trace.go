package bus

import (
	"context"

	otelce "github.com/cloudevents/sdk-go/observability/opentelemetry/v2/client"
	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/cloudevents/sdk-go/v2/extensions"
)

// Every event carries the W3C trace context of the span that sent it in
// the CloudEvents distributed tracing extension (ce-traceparent and
// ce-tracestate): the receiver continues the trace from it, so one change
// of a parent is one trace across the watcher, the hook and the applier.

// InjectTrace sets the event's distributed tracing extension to the span
// of ctx. A ctx without a span context leaves the event without one.
func InjectTrace(ctx context.Context, e *event.Event) {
	otelce.InjectDistributedTracingExtension(ctx, *e)
}

// ExtractTrace returns ctx with the span context of the event's
// distributed tracing extension as its remote parent, or ctx unchanged when
// the event has none (an event from a worker that does not pass it on).
func ExtractTrace(ctx context.Context, e *event.Event) context.Context {
	if _, ok := extensions.GetDistributedTracingExtension(*e); !ok {
		return ctx
	}
	return otelce.ExtractDistributedTracingExtension(ctx, *e)
}
