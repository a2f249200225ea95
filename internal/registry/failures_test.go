package registry

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// TestFailures: the tally counts each failing parent once, keeps the
// latest failure after its parent recovers, tells the applier when a
// parent recovers, and drops the parents that no longer exist.
func TestFailures(t *testing.T) {
	r := &Registry{failures: newFailures()}
	defer r.failures.queue.ShutDown()
	parent := func(name string) *unstructured.Unstructured {
		p := &unstructured.Unstructured{}
		p.SetNamespace("ns")
		p.SetName(name)
		p.SetUID(types.UID("uid-" + name))
		return p
	}
	a, b := parent("a"), parent("b")
	exist := func(string, types.UID) bool { return true }

	if r.ParentApplied("c", a) {
		t.Error("a parent never failing recovered")
	}
	r.ParentFailed("c", a, "InvalidHookReply", "bad")
	r.ParentFailed("c", a, "InvalidHookReply", "bad")
	r.ParentFailed("c", b, "StatusWriteFailed", ".status.x: field not declared in schema")
	n, last := r.failures.sweep("c", exist)
	if n != 2 || last == nil || last.Parent != "ns/b" || last.Reason != "StatusWriteFailed" {
		t.Fatalf("%d failing, last %+v; want 2, the last ns/b StatusWriteFailed", n, last)
	}
	if !r.ParentApplied("c", b) || r.ParentApplied("c", b) {
		t.Error("a recovered parent is not told once")
	}
	if n, last = r.failures.sweep("c", exist); n != 1 || last.Parent != "ns/b" {
		t.Errorf("after b recovered: %d failing, last %+v; want 1, the last still b's", n, last)
	}
	if n, _ = r.failures.sweep("c", func(key string, _ types.UID) bool { return key != "ns/a" }); n != 0 {
		t.Errorf("a deleted: %d failing, want 0", n)
	}
	r.ParentFailed("c", a, "HookFailed", "timeout")
	r.failures.forget("c")
	if n, last = r.failures.sweep("c", exist); n != 0 || last != nil {
		t.Errorf("controller gone: %d failing, last %+v", n, last)
	}
}
