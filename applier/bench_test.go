package applier

import (
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"universalcontroller.dev/uc/core"
	"universalcontroller.dev/uc/core/coretest"
	"universalcontroller.dev/uc/internal/objtest"
	"universalcontroller.dev/uc/internal/tracing"
	"universalcontroller.dev/uc/internal/tracing/otlp"
	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// BenchmarkApplySpans measures the spans of one apply of a reply with 5
// children whose last 4 are dry-run first — reply wait, apply, plan, dry
// run, 9 writes and status: 14 spans — as the applier makes them, with
// tracing off (uc's provider without an endpoint: the API's no-op, which
// passes the reply's trace context on) and recorded (sampled, into a batch
// that exports nowhere: all but the network of an export).
func BenchmarkApplySpans(b *testing.B) {
	for _, v := range otlp.EnvEndpoints {
		b.Setenv(v, "")
	}
	off, err := otlp.NewProvider(b.Context(), "", "uc-applier", "", false)
	if err != nil {
		b.Fatal(err)
	}
	// The hook call, sampled when the applier records its spans too.
	calls := sdktrace.NewTracerProvider()
	recorded := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
	defer func() { _ = recorded.Shutdown(b.Context()) }()
	ctl := coretest.Controller(v1alpha1.ChildUpdateInPlace)
	act := core.Write{Verb: core.VerbCreate, Child: &ctl.Children[0], Object: objtest.Object("ConfigMap", "ns", "c", nil, "")}
	meta := bus.Meta{Address: bus.Address{Controller: "test", Hook: hooks.Sync, ParentUID: "parent-uid"}, Namespace: "ns", Name: "p"}
	for _, tc := range []struct {
		name string
		tp   trace.TracerProvider
	}{{"off", off}, {"recorded", recorded}} {
		b.Run(tc.name, func(b *testing.B) {
			rc := &reconciler{tracer: tracing.Tracer(tc.tp)}
			wr := &writer{tracer: rc.tracer}
			// The hook call's span, as the reply carries it.
			_, call := calls.Tracer("worker").Start(b.Context(), "hook sync")
			r := &reply{meta: meta, span: call.SpanContext()}
			batch := newBatch(meta)
			batch.add(r)
			b.ReportAllocs()
			for b.Loop() {
				r.sent = time.Now()
				ctx, apply := rc.traceApply(b.Context(), batch)
				_, plan := rc.tracer.Start(ctx, "plan")
				plan.End()
				dryCtx, dry := rc.tracer.Start(ctx, "dry run")
				for range 4 {
					_, w := wr.startWrite(dryCtx, act, true)
					w.End()
				}
				dry.End()
				for range 5 {
					_, w := wr.startWrite(ctx, act, false)
					w.End()
				}
				_, status := rc.tracer.Start(ctx, "status")
				status.End()
				apply.End()
			}
		})
	}
}
