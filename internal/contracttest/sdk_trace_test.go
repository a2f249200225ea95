package contracttest_test

import (
	"context"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"k8s.io/apimachinery/pkg/util/wait"

	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/sdk/go/hook"
)

// spanningHook answers every request, in a span of its own made as a
// handler makes one: with the provider of the call's span.
type spanningHook struct{}

func (spanningHook) Hook() string { return hooks.Sync }

func (spanningHook) Handle(ctx context.Context, _ []byte) (any, error) {
	_, span := trace.SpanFromContext(ctx).TracerProvider().Tracer("hook").Start(ctx, "compute")
	defer span.End()
	return &hooks.SyncResponse{}, nil
}

// TestServeContinuesTheTrace: a call continues the trace of its request.
// With a TracerProvider, the request's wait on the bus and the call are
// spans under the request's span, the handler's own spans go under the
// call, and the reply names the call as its parent. Without one, the reply
// carries the request's trace context on as it came.
func TestServeContinuesTheTrace(t *testing.T) {
	for _, tc := range []struct {
		name   string
		traced bool
	}{{"with a tracer provider", true}, {"without", false}} {
		t.Run(tc.name, func(t *testing.T) {
			js := startJetStream(t, 30*time.Second)
			rec := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
			opts := []hook.Option{}
			if tc.traced {
				opts = append(opts, hook.WithTracerProvider(tp))
			}
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			go func() { _ = hook.Serve(ctx, js, "c", spanningHook{}, opts...) }()

			sent, publish := tp.Tracer("watcher").Start(t.Context(), "publish")
			meta := requestIn(sent, t, js, "p", "{}")
			publish.End()
			reply, _ := decode(t, last(t, js, bus.ReplyStream, meta.ReplySubject()))
			got := trace.SpanContextFromContext(bus.ExtractTrace(t.Context(), reply))
			if got.TraceID() != publish.SpanContext().TraceID() {
				t.Fatalf("reply in trace %s, want the request's %s", got.TraceID(), publish.SpanContext().TraceID())
			}
			if !tc.traced {
				if got.SpanID() != publish.SpanContext().SpanID() {
					t.Errorf("reply's parent %s, want the request's %s", got.SpanID(), publish.SpanContext().SpanID())
				}
				return
			}
			spans := map[string]sdktrace.ReadOnlySpan{}
			// The call's span ends just after the reply is out.
			err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
				for _, s := range rec.Ended() {
					spans[s.Name()] = s
				}
				return spans["hook sync"] != nil, nil
			})
			if err != nil {
				t.Fatalf("the call's span did not end: %v", err)
			}
			call := spans["hook sync"]
			for _, want := range []struct {
				span   string
				parent trace.SpanContext
			}{
				{"bus wait", publish.SpanContext()},
				{"hook sync", publish.SpanContext()},
				{"compute", call.SpanContext()},
			} {
				s, ok := spans[want.span]
				if !ok {
					t.Fatalf("no span %q among %v", want.span, spans)
				}
				if s.Parent().SpanID() != want.parent.SpanID() {
					t.Errorf("span %q's parent %s, want %s", want.span, s.Parent().SpanID(), want.parent.SpanID())
				}
			}
			if got.SpanID() != call.SpanContext().SpanID() {
				t.Errorf("reply's parent %s, want the call %s", got.SpanID(), call.SpanContext().SpanID())
			}
			if w := spans["bus wait"]; !w.StartTime().Before(w.EndTime()) || w.EndTime().After(call.StartTime()) {
				t.Errorf("bus wait from %s to %s, want a wait that ends before the call starts at %s", w.StartTime(), w.EndTime(), call.StartTime())
			}
		})
	}
}
