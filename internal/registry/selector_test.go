package registry

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
)

// A registry with a selector registers only the controller objects it
// selects, and lets one go when its labels stop matching.
func TestSelector(t *testing.T) {
	r := testRegistry(WithSelector(labels.SelectorFromSet(labels.Set{"team": "a"})))
	src := &r.sources[0]
	object := func(name string, lbls map[string]string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "universalcontroller.dev/v1alpha1", "kind": "UniversalController",
			"metadata": map[string]any{"name": name, "generation": int64(1)},
			"spec":     map[string]any{"parentResource": map[string]any{"apiVersion": "apps/v1", "resource": "statefulsets"}, "hooks": map[string]any{"sync": map[string]any{}}},
		}}
		u.SetLabels(lbls)
		return u
	}
	mine, theirs := object("mine", map[string]string{"team": "a"}), object("theirs", map[string]string{"team": "b"})
	for _, u := range []*unstructured.Unstructured{mine, theirs, object("nobodys", nil)} {
		if err := src.inf.GetIndexer().Add(u); err != nil {
			t.Fatal(err)
		}
		if err := r.sync(t.Context(), u.GetName()); err != nil {
			t.Fatalf("sync %s: %v", u.GetName(), err)
		}
	}
	registered := func() (names []string) {
		for _, n := range []string{"mine", "theirs", "nobodys"} {
			if _, ok := r.Get(n); ok {
				names = append(names, n)
			}
		}
		return names
	}
	if got := registered(); len(got) != 1 || got[0] != "mine" {
		t.Fatalf("registered %v, want only mine", got)
	}

	// Relabelled (same generation): let go, as if deleted.
	mine.SetLabels(map[string]string{"team": "b"})
	if err := src.inf.GetIndexer().Update(mine); err != nil {
		t.Fatal(err)
	}
	if err := r.sync(t.Context(), "mine"); err != nil {
		t.Fatal(err)
	}
	if got := registered(); len(got) != 0 {
		t.Fatalf("registered %v after mine was relabelled, want none", got)
	}
}

// A registry of an installation whose watchers are sharded gives every
// controller it registers the partitions; another gives none.
func TestShardedWatchers(t *testing.T) {
	for _, tc := range []struct {
		opts []Option
		want int
	}{{nil, 0}, {[]Option{WithShardedWatchers(8)}, 8}} {
		r := testRegistry(tc.opts...)
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "universalcontroller.dev/v1alpha1", "kind": "UniversalController",
			"metadata": map[string]any{"name": "c", "generation": int64(1)},
			"spec":     map[string]any{"parentResource": map[string]any{"apiVersion": "apps/v1", "resource": "statefulsets"}, "hooks": map[string]any{"sync": map[string]any{}}},
		}}
		if err := r.sources[0].inf.GetIndexer().Add(u); err != nil {
			t.Fatal(err)
		}
		if err := r.sync(t.Context(), "c"); err != nil {
			t.Fatal(err)
		}
		ctl, ok := r.Get("c")
		if !ok {
			t.Fatal("c is not registered")
		}
		if ctl.Partitions != tc.want {
			t.Errorf("registered with %d partitions, want %d", ctl.Partitions, tc.want)
		}
	}
}
