package hook

import (
	"context"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"universalcontroller.dev/uc/schemas/bus"
)

// A hook call continues the trace of its request (the request's
// ce-traceparent): a span for the time the request waited on the bus, and
// one for the call, under which go the handler's own spans — a handler
// makes them with the tracer provider of trace.SpanFromContext(ctx) — and
// the reply, whose ce-traceparent names the call. The spans are made with
// the OpenTelemetry API: the worker's main decides where they go, by
// setting the global TracerProvider (otel.SetTracerProvider) or with
// WithTracerProvider; without either they are not recorded, and the reply
// carries the request's trace context on.

// WithTracerProvider sets the TracerProvider of the hook calls' spans
// (default: the global one, otel.GetTracerProvider()).
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(o *options) { o.tracer = bus.Tracer(tp) }
}

// traceCall starts the span of a call of the hook for req, under the
// request's span, and records before it the time the request waited on
// the bus (on its first delivery: a request delivered again waited in a
// retry's backoff).
func (s *server) traceCall(ctx context.Context, msg jetstream.Msg, req *event.Event, meta bus.Meta) (context.Context, trace.Span) {
	ctx = bus.ExtractTrace(ctx, req)
	var deliveries uint64
	if md, err := msg.Metadata(); err == nil {
		deliveries = md.NumDelivered
	}
	attrs := func() []attribute.KeyValue {
		return append(meta.SpanAttributes(), attribute.Int64("messaging.message.delivery_count", int64(deliveries)))
	}
	if deliveries == 1 {
		bus.Waited(ctx, s.opts.tracer, "bus wait", req.Time(), attrs)
	}
	ctx, span := s.opts.tracer.Start(ctx, "hook "+meta.Hook, trace.WithSpanKind(trace.SpanKindConsumer))
	bus.SetSpanAttributes(span, attrs)
	return ctx, span
}
