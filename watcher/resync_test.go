package watcher

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	fakediscovery "k8s.io/client-go/discovery/fake"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	ktesting "k8s.io/client-go/testing"

	"universalcontroller.dev/uc/internal/registry"
)

// resyncTest is a watcher over a registry without controllers: a sync of
// any parent forgets it and succeeds, and its span says whether it was a
// resync. It does not run: the test syncs, and queues the resyncs of
// laterResyncs (queueDueResyncs), when it says so.
type resyncTest struct {
	t   *testing.T
	w   *Watcher
	rec *tracetest.SpanRecorder
}

func newResyncTest(t *testing.T) *resyncTest {
	rec := tracetest.NewSpanRecorder()
	reg := registry.New(dynamicfake.NewSimpleDynamicClient(runtime.NewScheme()), &fakediscovery.FakeDiscovery{Fake: &ktesting.Fake{}}, slog.Default())
	w := New(reg, nil, Options{TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))}, slog.Default())
	t.Cleanup(func() {
		w.queue.ShutDown()
		w.laterResyncs.ShutDown()
		w.republish.checks.ShutDown()
		w.Close()
	})
	return &resyncTest{t: t, w: w, rec: rec}
}

// syncAll syncs the items queued, one at a time, as a worker does, after
// checking that there are want of them.
func (r *resyncTest) syncAll(want int) {
	r.t.Helper()
	if n := r.w.queue.Len(); n != want {
		r.t.Fatalf("%d items queued, want %d", n, want)
	}
	for range want {
		if !r.w.worker().Next(r.t.Context(), r.w.queue) {
			r.t.Fatal("the queue shut down")
		}
	}
}

// syncs are the syncs made so far: whether each was a resync.
func (r *resyncTest) syncs() []bool {
	var out []bool
	for _, s := range r.rec.Ended() {
		if s.Name() != "sync" {
			continue
		}
		resync := false
		for _, kv := range s.Attributes() {
			resync = resync || kv.Key == "uc.resync" && kv.Value.AsBool()
		}
		out = append(out, resync)
	}
	return out
}

func (r *resyncTest) wantSyncs(want ...bool) {
	r.t.Helper()
	if got := r.syncs(); !slices.Equal(got, want) {
		r.t.Fatalf("syncs (resync or not) %v, want %v", got, want)
	}
}

// TestOneItemPerParent: a parent is one queue item whether its sync is a
// resync or not, so a resync and a change of one parent make one sync, and
// a resync is served once, by the first sync of the parent once it is due.
func TestOneItemPerParent(t *testing.T) {
	key := parentKey{Controller: "c", Namespace: "ns", Name: "p"}
	resync := func(w *Watcher) { w.resyncAfter(key, 0) }                           // uc resync, a republish
	change := func(w *Watcher) { w.enqueueChanged(key, 0) }                        // the parent changed
	deferred := func(w *Watcher) { w.queueSync(key, true, 0) }                     // a resync an apply's writes deferred
	both := func(w *Watcher) { w.queueSync(key, false, 0); w.resyncAfter(key, 0) } // a sync, and resyncPeriodSeconds due
	for _, tc := range []struct {
		name string
		ask  []func(*Watcher)
	}{
		{"a resync pending, then a change", []func(*Watcher){resync, change}},
		{"a change queued, then a resync", []func(*Watcher){change, resync}},
		{"two resyncs", []func(*Watcher){resync, deferred}},
		{"a sync and a resync due at once", []func(*Watcher){both, change}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newResyncTest(t)
			for _, ask := range tc.ask {
				ask(r.w)
			}
			r.syncAll(1)
			r.wantSyncs(true)
			change(r.w)
			r.syncAll(1)
			r.wantSyncs(true, false) // served once
		})
	}

	t.Run("a resync asked while the parent syncs waits for that sync", func(t *testing.T) {
		r := newResyncTest(t)
		change(r.w)
		item, _ := r.w.queue.Get() // a worker syncs the parent
		resync(r.w)
		if n := r.w.queue.Len(); n != 0 {
			t.Fatalf("%d items queued while the parent syncs, want none: another worker would sync it at once", n)
		}
		r.w.queue.Done(item)
		r.syncAll(1)
		r.wantSyncs(true)
	})

	t.Run("a resync asked for later: the syncs before it are not resyncs", func(t *testing.T) {
		r := newResyncTest(t)
		r.w.resyncAfter(key, time.Millisecond)
		change(r.w)
		r.syncAll(1)
		r.wantSyncs(false)
		go r.w.queueDueResyncs() // the resync falls due
		err := wait.PollUntilContextTimeout(t.Context(), time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			return r.w.queue.Len() > 0, nil
		})
		if err != nil {
			t.Fatal("the resync was never queued")
		}
		r.syncAll(1)
		r.wantSyncs(false, true)
	})
}

// TestFailedResyncIsRetriedAsOne: a resync whose sync fails (here, it
// panics) stays due: the retry is the resync.
func TestFailedResyncIsRetriedAsOne(t *testing.T) {
	var logs bytes.Buffer
	w := brokenWatcher(&logs)
	defer w.queue.ShutDown()
	key := parentKey{Controller: "c", Namespace: "ns", Name: "p"}
	w.resyncAfter(key, 0)
	if !w.worker().Next(t.Context(), w.queue) {
		t.Fatal("the worker loop stopped")
	}
	if !w.resyncs.take(key) {
		t.Fatal("the resync is no longer due after its sync failed")
	}
}
