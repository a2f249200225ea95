package applier

import (
	"encoding/json"
	"fmt"
	"runtime"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"universalcontroller.dev/uc/core"
	"universalcontroller.dev/uc/internal/tracing"
	"universalcontroller.dev/uc/internal/tracing/otlp"
	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// BenchmarkApplyPlan measures what the applier does for every reply before
// it writes: decode the reply (5 ConfigMaps, and 1000: the default most a
// reply may have), claim the live children and diff each against its
// desired object, for a parent whose children do not exist yet, are as
// desired, and have another payload. Besides the allocations per reply, it
// reports held-B/reply: the memory a reply holds once planned, while its
// writes are made — the reply decoded, and the objects its writes carry —
// besides its bytes as received.
func BenchmarkApplyPlan(b *testing.B) {
	ctl := testController(v1alpha1.ChildUpdateInPlace)
	parent := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Parent"}}
	parent.SetNamespace("ns")
	parent.SetName("p")
	parent.SetUID("parent-uid")
	reply := func(children int, payload string) *reply {
		resp := hooks.SyncResponse{Status: map[string]any{"children": children}}
		for i := range children {
			cm := object("ConfigMap", "", fmt.Sprintf("p-%d", i), map[string]any{"payload": payload}, "")
			cm.SetLabels(map[string]string{"app": "fanout", "fanout": "p"})
			resp.Children = append(resp.Children, cm)
		}
		data, err := json.Marshal(resp)
		if err != nil {
			b.Fatal(err)
		}
		return &reply{meta: bus.Meta{Address: bus.Address{Hook: hooks.Sync}}, typ: bus.ResponseType(hooks.Sync), data: data}
	}
	// live is the children as the applier applied them with payload.
	live := func(children int, payload string) indexedLive {
		out := indexedLive{byName: map[string]*unstructured.Unstructured{}}
		for _, d := range reply(children, payload).decoded(b).Children {
			o, err := desiredObject(ctl, parent, &ctl.Children[0], d, ownerRef(ctl, parent))
			if err != nil {
				b.Fatal(err)
			}
			o.SetUID(types.UID("uid-" + o.GetName()))
			out.fakeLive = append(out.fakeLive, o)
			out.byName[o.GetNamespace()+"/"+o.GetName()] = o
		}
		return out
	}
	for _, n := range []int{5, 1000} {
		for _, bc := range []struct {
			name   string
			live   indexedLive
			writes int
		}{{"create", live(0, ""), n}, {"unchanged", live(n, "one"), 0}, {"update", live(n, "two"), n}} {
			b.Run(fmt.Sprintf("%d/%s", n, bc.name), func(b *testing.B) {
				r := reply(n, "one")
				// The decoded reply and its writes, as apply holds them.
				type planned struct {
					resp    *hooks.SyncResponse
					actions []action
				}
				decodeAndPlan := func() planned {
					resp := r.decoded(b)
					actions, err := plan(ctl, parent, resp, bc.live)
					if err != nil || len(actions) != bc.writes {
						b.Fatalf("%d writes (err %v), want %d", len(actions), err, bc.writes)
					}
					return planned{resp, actions}
				}
				held := heldBy(func() any { return decodeAndPlan() })
				b.ReportAllocs()
				for b.Loop() {
					decodeAndPlan()
				}
				b.ReportMetric(float64(held), "held-B/reply")
			})
		}
	}
}

// indexedLive is a fakeLive of ConfigMaps that finds one by name in a map,
// as the informers' cache does, so a bench of a thousand children
// measures plan, not the fake.
type indexedLive struct {
	fakeLive
	byName map[string]*unstructured.Unstructured // by namespace/name
}

func (l indexedLive) get(_ *core.Child, ns, name string) (*unstructured.Unstructured, bool) {
	o, ok := l.byName[ns+"/"+name]
	return o, ok
}

// heldBy is the heap that what make returns holds, in bytes.
func heldBy(make func() any) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	held := make()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(held)
	return after.HeapAlloc - min(after.HeapAlloc, before.HeapAlloc)
}

func (r *reply) decoded(b *testing.B) *hooks.SyncResponse {
	resp, err := decodeReply[hooks.SyncResponse](r, true)
	if err != nil {
		b.Fatal(err)
	}
	return resp
}

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
	ctl := testController(v1alpha1.ChildUpdateInPlace)
	act := action{verb: verbCreate, child: &ctl.Children[0], obj: object("ConfigMap", "ns", "c", nil, "")}
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
