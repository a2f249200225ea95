package applier

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"universalcontroller.dev/uc/internal/tracing"
)

// An apply continues the trace of the hook call whose reply it applies
// (the reply's ce-traceparent): a span for the time the reply waited, from
// when the hook sent it until its apply started, then the apply's span, and
// under it the plan, the dry run, each write and the status.

// traceApply records the wait of the batch's latest reply, once — a retried
// apply does not wait for the bus again — and starts the apply's span under
// that reply's hook call, linked to the calls of the batch's other replies
// (a rolling update's older revisions).
func (rc *reconciler) traceApply(ctx context.Context, b *batch) (context.Context, trace.Span) {
	r := b.latest()
	ctx = trace.ContextWithRemoteSpanContext(ctx, r.span)
	attrs := func() []attribute.KeyValue { return tracing.Parent(r.meta) }
	tracing.Waited(ctx, rc.tracer, "reply wait", r.sent, attrs)
	r.sent = time.Time{}
	var links []trace.Link
	for _, other := range b.replies {
		if other != r {
			links = append(links, trace.Link{SpanContext: other.span})
		}
	}
	ctx, span := rc.tracer.Start(ctx, "apply", trace.WithSpanKind(trace.SpanKindConsumer), trace.WithLinks(links...))
	tracing.SetAttributes(span, attrs)
	return ctx, span
}

// endApply, deferred by an apply, ends the apply's span with its error,
// *err. When the apply panics, it ends the span with the panic as the
// error and panics again: the worker loop recovers it, counts it and
// retries the apply (internal/workloop), outside the span.
func endApply(span trace.Span, err *error) {
	if p := recover(); p != nil {
		tracing.End(span, fmt.Errorf("panic: %v", p))
		panic(p)
	}
	tracing.End(span, *err)
}
