package applier

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	fakediscovery "k8s.io/client-go/discovery/fake"
	fakedynamic "k8s.io/client-go/dynamic/fake"
	ktesting "k8s.io/client-go/testing"

	"universalcontroller.dev/uc/internal/bustest"
	"universalcontroller.dev/uc/internal/recovery"
	"universalcontroller.dev/uc/internal/registry"
	"universalcontroller.dev/uc/internal/shares"
	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
)

// queuedApplier is an applier holding partition 0, with one reply of
// controller c queued for each parent named.
func queuedApplier(t *testing.T, reg *registry.Registry, logs *bytes.Buffer, parents ...string) (*Applier, []*busMsg) {
	t.Helper()
	a := New(reg, nil, bustest.JetStream(t), nil, Options{}, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	t.Cleanup(a.in.shutDown)
	a.in.hold(newPartition(0, nil, shares.NewHold(time.Now()), allCached{}))
	var msgs []*busMsg
	for _, name := range parents {
		uid := types.UID("uid-" + name)
		msg := &busMsg{}
		meta := bus.Meta{Address: bus.Address{Controller: "c", Hook: hooks.Sync, ParentUID: uid}, Namespace: "ns", Name: name, Observation: 1}
		b := newBatch(meta)
		b.add(&reply{msg: msg, meta: meta, typ: bus.ResponseType(hooks.Sync), data: []byte(`{}`)})
		a.in.pending[uid] = b
		a.in.queue.Add(uid)
		msgs = append(msgs, msg)
	}
	return a, msgs
}

// TestApplyPanicIsRetried: an apply that panics (here: an applier without
// a registry, a nil pointer, as a bug would make one) does not stop the
// worker loop; the parent's replies are kept, in progress, and retried with
// backoff; every panic is counted and logged with the parent and the stack.
func TestApplyPanicIsRetried(t *testing.T) {
	var logs bytes.Buffer
	a, msgs := queuedApplier(t, nil, &logs, "p", "q")
	before := testutil.ToFloat64(recovery.Panics.WithLabelValues(recovery.Applier))
	for range 3 { // p, q, then p or q again after its backoff
		if !a.in.loop().Next(t.Context(), a.in.queue) {
			t.Fatal("the worker loop stopped")
		}
	}
	if got := testutil.ToFloat64(recovery.Panics.WithLabelValues(recovery.Applier)) - before; got != 3 {
		t.Errorf("counted %v panics, want 3", got)
	}
	for i, m := range msgs {
		if m.acked.Load() != 0 || m.inProgress.Load() == 0 {
			t.Errorf("reply %d: acked %d times, in progress %d times; want kept for a retry", i, m.acked.Load(), m.inProgress.Load())
		}
	}
	for _, want := range []string{"recovered from a panic", "parent=ns/p", "parent=ns/q", "stack=", "applier.(*reconciler).apply", "apply failed; will retry"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the log does not say %q:\n%s", want, logs.String())
		}
	}
}

// TestApplyWaitsQuietlyForTheRegistry: replies of a controller this
// replica has not registered yet (its registry catches up after a restart)
// are retried, and the wait is said once, at debug level, not as an error
// per reply.
func TestApplyWaitsQuietlyForTheRegistry(t *testing.T) {
	var logs bytes.Buffer
	// Never started: any controller may exist, none is registered.
	reg := registry.New(fakedynamic.NewSimpleDynamicClient(runtime.NewScheme()), &fakediscovery.FakeDiscovery{Fake: &ktesting.Fake{}}, slog.Default())
	a, msgs := queuedApplier(t, reg, &logs, "p", "q", "r")
	for range 4 {
		if !a.in.loop().Next(t.Context(), a.in.queue) {
			t.Fatal("the worker loop stopped")
		}
	}
	for i, m := range msgs {
		if m.acked.Load() != 0 || m.inProgress.Load() == 0 {
			t.Errorf("reply %d: acked %d times, in progress %d times; want kept for a retry", i, m.acked.Load(), m.inProgress.Load())
		}
	}
	if strings.Contains(logs.String(), "level=ERROR") {
		t.Errorf("waiting for the registry logged an error:\n%s", logs.String())
	}
	if n := strings.Count(logs.String(), "wait for the controller to be registered"); n != 1 {
		t.Errorf("the wait was said %d times, want once:\n%s", n, logs.String())
	}
}
