package applier

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/tools/record"

	"universalcontroller.dev/uc/core"
	"universalcontroller.dev/uc/core/coretest"
	"universalcontroller.dev/uc/internal/bustest"
	"universalcontroller.dev/uc/internal/objtest"
	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// TestApplyContinuesTheTrace: an apply continues the trace of the hook call
// whose reply it applies: the reply's wait (once: a retry does not wait for
// the bus again) and each attempt of the apply go under the call, linked to
// the calls of the batch's other replies; the dry run and each write go
// under the apply.
func TestApplyContinuesTheTrace(t *testing.T) {
	remote := func(span byte) trace.SpanContext {
		return trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{span}, TraceFlags: trace.FlagsSampled, Remote: true})
	}
	latest, older := remote(1), remote(2)
	meta := bus.Meta{Address: bus.Address{Controller: "test", Hook: hooks.Sync}, Name: "p", Revisions: []string{"new", "old"}}
	olderMeta := meta
	olderMeta.Revision = "old"
	b := newBatch(meta)
	b.add(&reply{meta: meta, sent: time.Now().Add(-time.Second), span: latest})
	b.add(&reply{meta: olderMeta, sent: time.Now(), span: older})

	rec := tracetest.NewSpanRecorder()
	tracer := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)).Tracer("test")
	rc := &reconciler{tracer: tracer}
	w := &writer{dyn: dynamicfake.NewSimpleDynamicClient(runtime.NewScheme()), events: record.NewFakeRecorder(10), log: slog.New(slog.DiscardHandler), tracer: tracer}
	ctl := coretest.Controller(v1alpha1.ChildUpdateInPlace)
	parent := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Parent"}}
	parent.SetNamespace("ns")
	parent.SetName("p")
	parent.SetUID("parent-uid")
	var applies []trace.SpanContext
	for attempt := range 2 {
		// A create, and a delete of a child already gone (the fake
		// client makes a dry run's create for real).
		obj, err := coretest.Desired(ctl, parent, objtest.Object("ConfigMap", "", fmt.Sprint("c-", attempt), nil, ""))
		if err != nil {
			t.Fatal(err)
		}
		actions := []core.Write{{Verb: core.VerbCreate, Child: &ctl.Children[0], Object: obj},
			{Verb: core.VerbDelete, Child: &ctl.Children[0], Object: objtest.Object("ConfigMap", "ns", "gone", nil, "parent-uid")}}
		ctx, span := rc.traceApply(t.Context(), b)
		if _, err := w.execute(ctx, ctl, parent, actions); err != nil {
			t.Fatal(err)
		}
		span.End()
		applies = append(applies, span.SpanContext())
	}

	byParent := map[string][]string{} // span names by their parent's span id
	var dryRuns []string
	for _, s := range rec.Ended() {
		name := s.Name()
		if name == "dry run" {
			dryRuns = append(dryRuns, s.SpanContext().SpanID().String())
		}
		if s.Name() == "apply" && (len(s.Links()) != 1 || s.Links()[0].SpanContext.SpanID() != older.SpanID()) {
			t.Errorf("apply linked to %v, want the older revision's reply %s", s.Links(), older.SpanID())
		}
		for _, kv := range s.Attributes() {
			if kv.Key == "uc.dry_run" && kv.Value.AsBool() {
				name += " (dry)"
			}
		}
		byParent[s.Parent().SpanID().String()] = append(byParent[s.Parent().SpanID().String()], name)
	}
	for _, want := range []struct {
		parent trace.SpanContext
		spans  string
	}{
		{latest, "[reply wait apply apply]"},
		{applies[0], "[dry run write write]"},
		{applies[1], "[dry run write write]"},
	} {
		if got := fmt.Sprint(byParent[want.parent.SpanID().String()]); got != want.spans {
			t.Errorf("spans under %s: %s, want %s", want.parent.SpanID(), got, want.spans)
		}
	}
	for _, id := range dryRuns {
		if got := fmt.Sprint(byParent[id]); got != "[write (dry)]" {
			t.Errorf("spans under the dry run %s: %s, want the dry run of the second write", id, got)
		}
	}
}

// TestPanickingApplyEndsItsSpan: an apply that panics ends its span with
// the panic as its error, and panics on to the worker loop, which
// recovers it.
func TestPanickingApplyEndsItsSpan(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	a := New(nil, nil, bustest.JetStream(t), nil, Options{TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))}, slog.New(slog.DiscardHandler))
	meta := bus.Meta{Address: bus.Address{Controller: "c", Hook: hooks.Sync, ParentUID: "uid"}, Namespace: "ns", Name: "p", Observation: 1}
	b := newBatch(meta)
	b.add(&reply{meta: meta, typ: bus.ResponseType(hooks.Sync), data: []byte(`{}`)})
	var panicked any
	func() {
		defer func() { panicked = recover() }()
		_ = a.rec.apply(t.Context(), newKnownParents(), b) // no registry: a nil pointer, as a bug would make one
	}()
	if panicked == nil {
		t.Fatal("the apply's panic did not go on to its caller, the worker loop")
	}
	var applies []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == "apply" {
			applies = append(applies, s)
		}
	}
	if len(applies) != 1 {
		t.Fatalf("%d apply spans ended, want 1", len(applies))
	}
	if st := applies[0].Status(); st.Code != codes.Error || !strings.Contains(st.Description, "panic: runtime error: invalid memory address") {
		t.Errorf("the apply's span ended with status %v, want the panic as an error", st)
	}
}
