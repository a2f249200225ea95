package applier

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"universalcontroller.dev/uc/internal/registry"
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
func (a *Applier) traceApply(ctx context.Context, b *batch) (context.Context, trace.Span) {
	r := b.latest()
	ctx = trace.ContextWithRemoteSpanContext(ctx, r.span)
	attrs := func() []attribute.KeyValue { return tracing.Parent(r.meta) }
	tracing.Waited(ctx, a.tracer, "reply wait", r.sent, attrs)
	r.sent = time.Time{}
	var links []trace.Link
	for _, other := range b.replies {
		if other != r {
			links = append(links, trace.Link{SpanContext: other.span})
		}
	}
	ctx, span := a.tracer.Start(ctx, "apply", trace.WithSpanKind(trace.SpanKindConsumer), trace.WithLinks(links...))
	tracing.SetAttributes(span, attrs)
	return ctx, span
}

// tracedWrite is write in a span of its own.
func (a *Applier) tracedWrite(ctx context.Context, ctl *registry.Controller, act action, dryRun bool) (writeResult, error) {
	ctx, span := a.startWrite(ctx, act, dryRun)
	result, err := a.write(ctx, ctl, act, dryRun)
	tracing.SetAttributes(span, func() []attribute.KeyValue {
		return []attribute.KeyValue{attribute.Bool("uc.changed", result == changedObject)}
	})
	tracing.End(span, err)
	return result, err
}

// startWrite starts the span of a write.
func (a *Applier) startWrite(ctx context.Context, act action, dryRun bool) (context.Context, trace.Span) {
	ctx, span := a.tracer.Start(ctx, "write", trace.WithSpanKind(trace.SpanKindClient))
	tracing.SetAttributes(span, func() []attribute.KeyValue {
		return []attribute.KeyValue{attribute.String("uc.verb", string(act.verb)), attribute.String("uc.resource", act.child.GVR.Resource),
			attribute.String("uc.object", objectKey(act.obj)), attribute.Bool("uc.dry_run", dryRun)}
	})
	return ctx, span
}
