package registry

import (
	"context"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	fakediscovery "k8s.io/client-go/discovery/fake"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	ktesting "k8s.io/client-go/testing"

	"universalcontroller.dev/uc/core"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// TestHeldGroups: an applier replica's registry watches the partitions it
// takes together as one group, and those it takes later as another; a
// partition released leaves the caches — at once with the last of its
// group, otherwise once the group's others are watched anew without it;
// one released and taken again before that is read from its group still,
// without a relist. Whatever the order, the caches end up holding exactly
// the objects of the partitions held and of none, each once. The fake
// dynamic client filters a List by its label selector.
func TestHeldGroups(t *testing.T) {
	type step struct {
		hold, release []int
		// then: the partitions each group watches, oldest first, once
		// they settle.
		then [][]int
	}
	for _, tc := range []struct {
		name  string
		steps []step
		// lists are the LISTs of foos by a partition selector, in order.
		lists []string
	}{
		{
			name:  "taken together",
			steps: []step{{hold: []int{0, 1, 2, 3}, then: [][]int{{0, 1, 2, 3}}}},
			lists: []string{"in (0,1,2,3)"},
		},
		{
			name: "taken in two balances",
			steps: []step{
				{hold: []int{0, 1}, then: [][]int{{0, 1}}},
				{hold: []int{3}, then: [][]int{{0, 1}, {3}}},
			},
			lists: []string{"in (0,1)", "in (3)"},
		},
		{
			name: "one released from its group",
			steps: []step{
				{hold: []int{0, 1, 2, 3}, then: [][]int{{0, 1, 2, 3}}},
				{release: []int{1}, then: [][]int{{0, 2, 3}}},
			},
			lists: []string{"in (0,1,2,3)", "in (0,2,3)"},
		},
		{
			name: "the last of a group released",
			steps: []step{
				{hold: []int{0, 1}, then: [][]int{{0, 1}}},
				{hold: []int{2, 3}, then: [][]int{{0, 1}, {2, 3}}},
				{release: []int{3, 2}, then: [][]int{{0, 1}}},
			},
			lists: []string{"in (0,1)", "in (2,3)"},
		},
		{
			name: "released and taken again",
			steps: []step{
				{hold: []int{0, 1, 2}, then: [][]int{{0, 1, 2}}},
				{release: []int{1}, hold: []int{1}, then: [][]int{{0, 1, 2}}},
			},
			lists: []string{"in (0,1,2)"},
		},
		{
			name: "released from two groups, one taken",
			steps: []step{
				{hold: []int{0, 1}, then: [][]int{{0, 1}}},
				{hold: []int{2, 3}, then: [][]int{{0, 1}, {2, 3}}},
				{release: []int{1, 3}, hold: []int{1}, then: [][]int{{0, 1}, {2}}},
			},
			lists: []string{"in (0,1)", "in (2,3)", "in (2)"},
		},
		{
			name: "all released",
			steps: []step{
				{hold: []int{0, 1, 2, 3}, then: [][]int{{0, 1, 2, 3}}},
				{release: []int{0, 1, 2, 3}, then: [][]int{}},
			},
			lists: []string{"in (0,1,2,3)"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, lists := heldRegistry(t)
			h := r.owned.(*heldSets)
			held := map[int]bool{}
			for i, s := range tc.steps {
				for _, n := range s.release {
					r.Release(n)
					delete(held, n)
				}
				for _, n := range s.hold {
					r.Hold(n)
					held[n] = true
				}
				for n := range held {
					ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
					err := r.WaitHeld(ctx, n)
					cancel()
					if err != nil {
						t.Fatalf("step %d: %v", i, err)
					}
				}
				// 1 foo in each partition held, and 1 in none.
				want := len(held) + 1
				err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
					return slices.EqualFunc(watched(h), s.then, slices.Equal) && r.Cached()[foos] == want, nil
				})
				if err != nil {
					t.Fatalf("step %d: groups %v caching %d foos, want %v caching %d", i, watched(h), r.Cached()[foos], s.then, want)
				}
				for n := range 4 {
					if _, err := r.Object(foos, "ns", "p"+strconv.Itoa(n)); (err == nil) != held[n] {
						t.Errorf("step %d: partition %d held %v, its object read: %v", i, n, held[n], err)
					}
				}
			}
			if got := lists(); !slices.Equal(got, tc.lists) {
				t.Errorf("listed foos %q, want %q", got, tc.lists)
			}
		})
	}
}

var foos = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "foos"}

// heldRegistry is an applier replica's registry of 4 partitions, quick to
// group them, with a controller of foos: one in each partition, one in
// none. lists are the LISTs of foos by partition so far.
func heldRegistry(t *testing.T) (r *Registry, lists func() []string) {
	var objs []runtime.Object
	for _, p := range []string{"0", "1", "2", "3", ""} {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Foo"}}
		u.SetNamespace("ns")
		u.SetName("p" + p)
		if p != "" {
			u.SetLabels(map[string]string{v1alpha1.LabelPartition: p})
		}
		objs = append(objs, u)
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{foos: "FooList"}, objs...)
	var mu sync.Mutex
	var listed []string
	dyn.PrependReactor("list", "foos", func(a ktesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		if sel := a.(ktesting.ListActionImpl).ListOptions.LabelSelector; sel != unlabelledSelector(4) {
			listed = append(listed, sel[len(v1alpha1.LabelPartition)+1:])
		}
		return false, nil, nil
	})
	r = New(dyn, &fakediscovery.FakeDiscovery{Fake: &ktesting.Fake{}}, slog.New(slog.DiscardHandler), WithHeldPartitions(4))
	r.owned.(*heldSets).settle = 20 * time.Millisecond
	ctl := &core.Controller{Name: "c", Parent: core.Resource{GVR: foos}}
	if err := r.startInformers(t.Context(), ctl); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.owned.stopAll)
	return r, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(listed)
	}
}

// watched are the partitions each group of informers watches, oldest
// first.
func watched(h *heldSets) [][]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([][]int, len(h.groups))
	for i, g := range h.groups {
		out[i] = slices.Clone(g.partitions)
	}
	return out
}
