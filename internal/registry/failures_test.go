package registry

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// failingParent is a parent in ns "ns" with the given Synced condition
// (nil: none) and labels.
func failingParent(name string, synced map[string]any, lbls map[string]string) *unstructured.Unstructured {
	p := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "StatefulSet"}}
	p.SetNamespace("ns")
	p.SetName(name)
	p.SetUID(types.UID("uid-" + name))
	p.SetLabels(lbls)
	if synced != nil {
		c := map[string]any{"type": v1alpha1.ConditionSynced}
		for k, v := range synced {
			c[k] = v
		}
		p.Object["status"] = map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": "True"}, c}}
	}
	return p
}

func syncedAt(status, reason, at string) map[string]any {
	return map[string]any{"status": status, "reason": reason, "message": reason + " message", "lastTransitionTime": at}
}

func at(s string) metav1.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return metav1.NewTime(t)
}

// TestFailuresCount: a parent counts as failing while its Synced condition
// is False, whoever wrote it; a failure this process's appliers saw on a
// parent that carries no Synced=False counts only where this process runs
// every apply; the latest failure is picked the same way everywhere, and
// what a condition lacks is filled in.
func TestFailuresCount(t *testing.T) {
	const t1, t2, t3 = "2030-01-01T00:00:01Z", "2030-01-01T00:00:02Z", "2030-01-01T00:00:03Z"
	now := at("2030-01-01T01:00:00Z")
	seen := func(reason, when string) *v1alpha1.ParentFailure {
		return &v1alpha1.ParentFailure{Reason: reason, Message: reason + " seen", Time: at(when)}
	}
	for _, tc := range []struct {
		name    string
		sole    bool
		parents []*unstructured.Unstructured
		seen    map[string]*v1alpha1.ParentFailure // by parent name
		want    int
		latest  *v1alpha1.ParentFailure
	}{
		{name: "none failing", parents: []*unstructured.Unstructured{
			failingParent("a", syncedAt("True", "Applied", t1), nil),
			failingParent("b", nil, nil),
		}},
		{name: "Synced=False counts, the latest named", parents: []*unstructured.Unstructured{
			failingParent("a", syncedAt("False", "InvalidHookReply", t2), nil),
			failingParent("b", syncedAt("False", "HookFailed", t3), nil),
			failingParent("c", syncedAt("True", "Applied", t3), nil),
			failingParent("d", syncedAt("Unknown", "Waiting", t3), nil),
		}, want: 2, latest: &v1alpha1.ParentFailure{Parent: "ns/b", Reason: "HookFailed", Message: "HookFailed message", Time: at(t3)}},
		{name: "same second: the same parent everywhere", parents: []*unstructured.Unstructured{
			failingParent("b", syncedAt("False", "HookFailed", t2), nil),
			failingParent("a", syncedAt("False", "InvalidHookReply", t2), nil),
		}, want: 2, latest: &v1alpha1.ParentFailure{Parent: "ns/b", Reason: "HookFailed", Message: "HookFailed message", Time: at(t2)}},
		{name: "seen here, not sole: the parent is the record", parents: []*unstructured.Unstructured{
			failingParent("a", nil, nil),
			failingParent("b", syncedAt("True", "Applied", t1), nil),
		}, seen: map[string]*v1alpha1.ParentFailure{"a": seen("InvalidHookReply", t2), "b": seen("StatusWriteFailed", t3)}},
		{name: "seen here, sole: no room for the condition, or a status refused", sole: true, parents: []*unstructured.Unstructured{
			failingParent("a", nil, nil),
			failingParent("b", syncedAt("True", "Applied", t1), nil),
			failingParent("c", syncedAt("False", "HookFailed", t1), nil),
		}, seen: map[string]*v1alpha1.ParentFailure{"a": seen("InvalidHookReply", t2), "b": seen("StatusWriteFailed", t3)},
			want: 3, latest: &v1alpha1.ParentFailure{Parent: "ns/b", Reason: "StatusWriteFailed", Message: "StatusWriteFailed seen", Time: at(t3)}},
		{name: "a condition of type and status only, sole: what was seen fills it in", sole: true, parents: []*unstructured.Unstructured{
			failingParent("a", map[string]any{"status": "False"}, nil),
		}, seen: map[string]*v1alpha1.ParentFailure{"a": seen("InvalidHookReply", t2)},
			want: 1, latest: &v1alpha1.ParentFailure{Parent: "ns/a", Reason: "InvalidHookReply", Message: "InvalidHookReply seen", Time: at(t2)}},
		{name: "a condition of type and status only, nothing seen: Unknown, since now", parents: []*unstructured.Unstructured{
			failingParent("a", map[string]any{"status": "False"}, nil),
		}, want: 1, latest: &v1alpha1.ParentFailure{Parent: "ns/a", Reason: unknownReason, Time: now}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFailures()
			defer f.queue.ShutDown()
			f.sole = tc.sole
			r := &Registry{failures: f}
			for _, p := range tc.parents {
				if s := tc.seen[p.GetName()]; s != nil {
					r.ParentFailed("c", p, s.Reason, s.Message)
					f.seen[p.GetUID()]["c"] = v1alpha1.ParentFailure{Parent: cacheKey(p), Reason: s.Reason, Message: s.Message, Time: s.Time}
				}
			}
			n, latest := f.count("c", tc.parents, now)
			if n != tc.want || !equality.Semantic.DeepEqual(latest, tc.latest) {
				t.Errorf("count: %d, latest %+v; want %d, %+v", n, latest, tc.want, tc.latest)
			}
		})
	}
}

// TestFailuresSinceKept: a failing parent whose condition has no time is
// given the time it was first counted, and keeps it while it fails.
func TestFailuresSinceKept(t *testing.T) {
	f := newFailures()
	defer f.queue.ShutDown()
	p := failingParent("a", map[string]any{"status": "False"}, nil)
	first, later := at("2030-01-01T00:00:01Z"), at("2030-01-01T00:00:09Z")
	for i, now := range []metav1.Time{first, later} {
		if _, latest := f.count("c", []*unstructured.Unstructured{p}, now); !latest.Time.Equal(&first) {
			t.Errorf("count %d: time %v, want %v", i, latest.Time, first)
		}
	}
	f.count("c", nil, later) // recovered
	if _, latest := f.count("c", []*unstructured.Unstructured{p}, later); !latest.Time.Equal(&later) {
		t.Errorf("failing again: time %v, want %v", latest.Time, later)
	}
}

// TestFailuresMemory: the applier's reports tell a parent's recovery once,
// and what is known of a parent goes with it, and of a controller with it.
func TestFailuresMemory(t *testing.T) {
	r := &Registry{failures: newFailures()}
	defer r.failures.queue.ShutDown()
	r.failures.sole = true
	a, b := failingParent("a", nil, nil), failingParent("b", nil, nil)
	yes := new(bool)
	*yes = true
	counts := func() int {
		n, _ := r.failures.count("c", []*unstructured.Unstructured{a, b}, metav1.Now())
		return n
	}
	for _, step := range []struct {
		name string
		do   func() bool // its result is checked against want, when set
		want *bool
		n    int
	}{
		{name: "never failing, applied", do: func() bool { return r.ParentApplied("c", a) }, want: new(bool)},
		{name: "a fails twice, b once", do: func() bool {
			r.ParentFailed("c", a, "InvalidHookReply", "bad")
			r.ParentFailed("c", a, "InvalidHookReply", "bad")
			r.ParentFailed("c", b, "StatusWriteFailed", "refused")
			return false
		}, n: 2},
		{name: "b recovers: told once", do: func() bool { return r.ParentApplied("c", b) }, want: yes, n: 1},
		{name: "b again", do: func() bool { return r.ParentApplied("c", b) }, want: new(bool), n: 1},
		{name: "a deleted", do: func() bool { return r.failures.gone(a.GetUID()) }, want: yes, n: 0},
		{name: "b fails, controller gone", do: func() bool {
			r.ParentFailed("c", b, "HookFailed", "timeout")
			r.failures.forget("c")
			return false
		}, n: 0},
	} {
		got := step.do()
		if step.want != nil && got != *step.want {
			t.Errorf("%s: %v, want %v", step.name, got, *step.want)
		}
		if n := counts(); n != step.n {
			t.Errorf("%s: %d failing, want %d", step.name, n, step.n)
		}
	}
	if len(r.failures.seen) != 0 {
		t.Errorf("memory left: %v", r.failures.seen)
	}
}

// TestLastFailure: the latest failure is written unless the one written is
// later; the one written stays after its parent recovers; a newer word on
// the same failure replaces it.
func TestLastFailure(t *testing.T) {
	fail := func(parent, reason, when string) *v1alpha1.ParentFailure {
		return &v1alpha1.ParentFailure{Parent: parent, Reason: reason, Time: at(when)}
	}
	const t1, t2 = "2030-01-01T00:00:01Z", "2030-01-01T00:00:02Z"
	for _, tc := range []struct {
		name            string
		written, latest *v1alpha1.ParentFailure
		want            *v1alpha1.ParentFailure
	}{
		{name: "nothing", want: nil},
		{name: "first", latest: fail("a", "X", t1), want: fail("a", "X", t1)},
		{name: "kept after recovery", written: fail("a", "X", t1), want: fail("a", "X", t1)},
		{name: "later replaces", written: fail("a", "X", t1), latest: fail("b", "Y", t2), want: fail("b", "Y", t2)},
		{name: "earlier does not", written: fail("b", "Y", t2), latest: fail("a", "X", t1), want: fail("b", "Y", t2)},
		{name: "same parent and time, newer word", written: fail("a", "X", t1), latest: fail("a", "Z", t1), want: fail("a", "Z", t1)},
		{name: "same time, parent picked by name", written: fail("b", "Y", t1), latest: fail("a", "X", t1), want: fail("b", "Y", t1)},
	} {
		if got := lastFailure(tc.written, tc.latest); !equality.Semantic.DeepEqual(got, tc.want) {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// TestFailureChanged: which updates of an object may change the count.
func TestFailureChanged(t *testing.T) {
	const t1 = "2030-01-01T00:00:01Z"
	team := map[string]string{"team": "a"}
	for _, tc := range []struct {
		name     string
		old, cur *unstructured.Unstructured
		want     bool
	}{
		{name: "no conditions", old: failingParent("a", nil, nil), cur: failingParent("a", nil, team)},
		{name: "Synced unchanged, healthy, relabelled", old: failingParent("a", syncedAt("True", "Applied", t1), nil), cur: failingParent("a", syncedAt("True", "Applied", t1), team)},
		{name: "failing, relabelled", old: failingParent("a", syncedAt("False", "HookFailed", t1), nil), cur: failingParent("a", syncedAt("False", "HookFailed", t1), team), want: true},
		{name: "starts failing", old: failingParent("a", syncedAt("True", "Applied", t1), nil), cur: failingParent("a", syncedAt("False", "HookFailed", t1), nil), want: true},
		{name: "recovers", old: failingParent("a", syncedAt("False", "HookFailed", t1), nil), cur: failingParent("a", syncedAt("True", "Applied", t1), nil), want: true},
		{name: "another failure", old: failingParent("a", syncedAt("False", "HookFailed", t1), nil), cur: failingParent("a", syncedAt("False", "InvalidHookReply", t1), nil), want: true},
		{name: "first condition, healthy", old: failingParent("a", nil, nil), cur: failingParent("a", syncedAt("True", "Applied", t1), nil)},
		{name: "first condition, failing", old: failingParent("a", nil, nil), cur: failingParent("a", syncedAt("False", "HookFailed", t1), nil), want: true},
		{name: "healthy, applied again", old: failingParent("a", syncedAt("True", "Applied", t1), nil), cur: failingParent("a", syncedAt("True", "Applied", "2030-01-01T00:00:02Z"), nil)},
	} {
		if got := failureChanged(tc.old, tc.cur); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestReportFailures: a registry that reports on UniversalControllers
// writes the count of a controller's failing parents from the parents in
// its cache — only those its labelSelector selects — as soon as it
// registers the controller ("none failing" too), and again as parents
// fail, recover and go, with its own field manager.
func TestReportFailures(t *testing.T) {
	statusDyn := dynamicfake.NewSimpleDynamicClient(runtime.NewScheme())
	var mu sync.Mutex
	var written []map[string]any
	statusDyn.PrependReactor("patch", "universalcontrollers", func(a k8stesting.Action) (bool, runtime.Object, error) {
		p := a.(k8stesting.PatchAction)
		if p.GetSubresource() != "status" {
			t.Errorf("patch of %q, want status", p.GetSubresource())
		}
		var obj map[string]any
		if err := json.Unmarshal(p.GetPatch(), &obj); err != nil {
			t.Error(err)
		}
		status, _ := obj["status"].(map[string]any)
		if _, ok := status["parentsFailing"]; ok {
			mu.Lock()
			written = append(written, status)
			mu.Unlock()
		}
		return true, &unstructured.Unstructured{Object: obj}, nil
	})
	r := testRegistry(WithStatus(statusDyn, record.NewFakeRecorder(100)))
	ctx := t.Context()
	go r.reportFailures(ctx)
	defer r.failures.queue.ShutDown()

	uc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "universalcontroller.dev/v1alpha1", "kind": "UniversalController",
		"metadata": map[string]any{"name": "c", "generation": int64(1)},
		"spec": map[string]any{"parentResource": map[string]any{"apiVersion": "apps/v1", "resource": "statefulsets",
			"labelSelector": map[string]any{"matchLabels": map[string]any{"team": "a"}}}, "hooks": map[string]any{"sync": map[string]any{}}},
	}}
	if err := r.sources[0].inf.GetIndexer().Add(uc); err != nil {
		t.Fatal(err)
	}
	if err := r.sync(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	sts := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "statefulsets"}
	parents := r.related.dyn.Resource(sts).Namespace("ns")
	// The report is written for the UniversalController as the cache has
	// it: the fake does not update it, so each report says what changed.
	wrote := func(n int64, lastParent string) func(context.Context) (bool, error) {
		return func(context.Context) (bool, error) {
			mu.Lock()
			defer mu.Unlock()
			if len(written) == 0 {
				return false, nil
			}
			got := written[len(written)-1]
			last, _ := got["lastFailure"].(map[string]any)
			return got["parentsFailing"] == float64(n) && (lastParent == "" || last["parent"] == lastParent), nil
		}
	}
	team := map[string]string{"team": "a"}
	const t1, t2 = "2030-01-01T00:00:01Z", "2030-01-01T00:00:02Z"
	for _, step := range []struct {
		name       string
		do         func() error
		n          int64
		lastParent string
	}{
		{name: "registered", do: func() error { return nil }, n: 0},
		{name: "two fail, one of them another controller's", do: func() error {
			if _, err := parents.Create(ctx, failingParent("a", syncedAt("False", "HookFailed", t1), team), metav1.CreateOptions{}); err != nil {
				return err
			}
			if _, err := parents.Create(ctx, failingParent("b", syncedAt("False", "HookFailed", t2), nil), metav1.CreateOptions{}); err != nil {
				return err
			}
			_, err := parents.Create(ctx, failingParent("c", syncedAt("False", "InvalidHookReply", t2), team), metav1.CreateOptions{})
			return err
		}, n: 2, lastParent: "ns/c"},
		{name: "c recovers", do: func() error {
			_, err := parents.Update(ctx, failingParent("c", syncedAt("True", "Applied", t2), team), metav1.UpdateOptions{})
			return err
		}, n: 1},
		{name: "a goes", do: func() error { return parents.Delete(ctx, "a", metav1.DeleteOptions{}) }, n: 0},
	} {
		if err := step.do(); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, wrote(step.n, step.lastParent)); err != nil {
			mu.Lock()
			t.Fatalf("%s: written %v, want parentsFailing %d, lastFailure of %q", step.name, written, step.n, step.lastParent)
		}
	}
}
