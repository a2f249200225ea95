package registry

import (
	"errors"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	fakediscovery "k8s.io/client-go/discovery/fake"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	ktesting "k8s.io/client-go/testing"

	"universalcontroller.dev/uc/core"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// TestPartitionSelector: the selector of the partitions held names each
// once; holding none, or a negative one, is refused.
func TestPartitionSelector(t *testing.T) {
	for _, tc := range []struct {
		held []int
		want string // "": it panics
	}{
		{[]int{1, 3}, "universalcontroller.dev/partition in (1,3)"},
		{[]int{3, 1, 3}, "universalcontroller.dev/partition in (1,3)"},
		{[]int{0}, "universalcontroller.dev/partition in (0)"},
		{nil, ""},
		{[]int{}, ""},
		{[]int{2, -1}, ""},
	} {
		var got string
		panicked := func() (panicked bool) {
			defer func() { panicked = recover() != nil }()
			got = partitionSelector(tc.held)
			return false
		}()
		if tc.want == "" {
			if !panicked {
				t.Errorf("partitions %v: selector %q, want a panic", tc.held, got)
			}
			continue
		}
		if panicked || got != tc.want {
			t.Errorf("partitions %v: selector %q, want %q", tc.held, got, tc.want)
		}
	}
}

// TestPartitionedInformers: a watcher shard's registry lists and watches
// its partitions' parents, children and revisions only, selected by the
// API server, and every related object and namespace; an unpartitioned
// registry lists and watches everything, one informer per resource. The
// fake dynamic client filters a List by its label selector (not a Watch),
// so the caches' counts show what the server sent.
func TestPartitionedInformers(t *testing.T) {
	secrets := schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	namespacesGVR := schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	const (
		partitioned = "universalcontroller.dev/partition in (1,3)"
		unlabelled  = "universalcontroller.dev/partition notin (0,1,2,3)"
	)
	ctl := &core.Controller{
		Name:     "c",
		Parent:   core.Resource{GVR: foos},
		Children: []core.Child{{Resource: core.Resource{GVR: configMaps}, Method: v1alpha1.ChildUpdateRollingRecreate}},
	}
	for _, tc := range []struct {
		name string
		opts []Option
		// selectors are the label selectors each resource is listed and
		// watched with; cached, the objects its caches hold (owned,
		// related).
		selectors map[schema.GroupVersionResource][]string
		owned     map[schema.GroupVersionResource]int
		related   map[schema.GroupVersionResource]int
		oneSet    bool
		// hold are the partitions an applier replica's registry holds.
		hold []int
	}{
		{
			name: "shard of partitions 1 and 3",
			opts: []Option{WithPartitions([]int{3, 1})},
			selectors: map[schema.GroupVersionResource][]string{
				foos: {partitioned}, configMaps: {partitioned}, v1alpha1.RevisionResource: {partitioned},
				secrets: {""}, namespacesGVR: {""},
			},
			owned:   map[schema.GroupVersionResource]int{foos: 2, configMaps: 2, v1alpha1.RevisionResource: 2},
			related: map[schema.GroupVersionResource]int{secrets: 4, namespacesGVR: 1},
		},
		{
			name: "applier replica of partitions 1 and 3 of 4",
			opts: []Option{WithHeldPartitions(4)},
			hold: []int{1, 3},
			selectors: map[schema.GroupVersionResource][]string{
				foos:                      {unlabelled, partitioned},
				configMaps:                {unlabelled, partitioned},
				v1alpha1.RevisionResource: {unlabelled, partitioned},
				secrets:                   {""}, namespacesGVR: {""},
			},
			owned:   map[schema.GroupVersionResource]int{foos: 3, configMaps: 3, v1alpha1.RevisionResource: 3},
			related: map[schema.GroupVersionResource]int{secrets: 4, namespacesGVR: 1},
		},
		{
			name: "unpartitioned",
			selectors: map[schema.GroupVersionResource][]string{
				foos: {""}, configMaps: {""}, v1alpha1.RevisionResource: {""}, secrets: {""}, namespacesGVR: {""},
			},
			owned:   map[schema.GroupVersionResource]int{foos: 4, configMaps: 4, v1alpha1.RevisionResource: 4, secrets: 4, namespacesGVR: 1},
			related: map[schema.GroupVersionResource]int{foos: 4, configMaps: 4, v1alpha1.RevisionResource: 4, secrets: 4, namespacesGVR: 1},
			oneSet:  true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Each resource has an object in partitions 0, 1 and 3, and one
			// with no partition.
			var objs []runtime.Object
			for _, kind := range []struct{ apiVersion, kind string }{
				{"example.com/v1", "Foo"}, {"v1", "ConfigMap"}, {v1alpha1.Group + "/" + v1alpha1.Version, "ControllerRevision"}, {"v1", "Secret"},
			} {
				for _, p := range []string{"0", "1", "3", ""} {
					u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": kind.apiVersion, "kind": kind.kind}}
					u.SetNamespace("ns")
					u.SetName("p" + p)
					if p != "" {
						u.SetLabels(map[string]string{v1alpha1.LabelPartition: p})
					}
					objs = append(objs, u)
				}
			}
			ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace"}}
			ns.SetName("ns")
			objs = append(objs, ns)
			dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
				foos: "FooList", configMaps: "ConfigMapList", v1alpha1.RevisionResource: "ControllerRevisionList",
				secrets: "SecretList", namespacesGVR: "NamespaceList",
			}, objs...)
			var mu sync.Mutex
			asked := map[schema.GroupVersionResource]map[string]bool{} // "list <selector>", "watch <selector>"
			record := func(a ktesting.Action) (bool, runtime.Object, error) {
				var sel string
				switch a := a.(type) {
				case ktesting.ListActionImpl:
					sel = a.ListOptions.LabelSelector
				case ktesting.WatchActionImpl:
					sel = a.ListOptions.LabelSelector
				}
				mu.Lock()
				defer mu.Unlock()
				if asked[a.GetResource()] == nil {
					asked[a.GetResource()] = map[string]bool{}
				}
				asked[a.GetResource()][a.GetVerb()+" "+sel] = true
				return false, nil, nil
			}
			dyn.PrependReactor("list", "*", record)
			dyn.PrependWatchReactor("*", func(a ktesting.Action) (bool, watch.Interface, error) {
				_, _, _ = record(a)
				return false, nil, nil
			})
			r := New(dyn, &fakediscovery.FakeDiscovery{Fake: &ktesting.Fake{}}, slog.New(slog.DiscardHandler), tc.opts...)
			if got := r.owned == r.related; got != tc.oneSet {
				t.Fatalf("one set of informers: %v, want %v", got, tc.oneSet)
			}
			if err := r.startInformers(t.Context(), ctl); err != nil {
				t.Fatal(err)
			}
			for _, gvr := range []schema.GroupVersionResource{secrets, namespacesGVR} {
				if err := r.Watch(t.Context(), ctl.Name, gvr); err != nil {
					t.Fatal(err)
				}
			}
			defer r.only(ctl.Name)
			for _, n := range tc.hold {
				r.Hold(n)
			}
			for _, n := range tc.hold {
				if err := r.WaitHeld(t.Context(), n); err != nil {
					t.Fatal(err)
				}
			}

			mu.Lock()
			for gvr, sels := range tc.selectors {
				want := map[string]bool{}
				for _, sel := range sels {
					want["list "+sel], want["watch "+sel] = true, true
				}
				if !maps.Equal(asked[gvr], want) {
					t.Errorf("%s asked for %v, want %v", gvr.Resource, asked[gvr], want)
				}
			}
			mu.Unlock()
			if got := r.Cached(); !maps.Equal(got, tc.owned) {
				t.Errorf("Cached() = %v, want %v", got, tc.owned)
			}
			if got := r.related.cached(); !maps.Equal(got, tc.related) {
				t.Errorf("related caches hold %v, want %v", got, tc.related)
			}
			// Related objects are read from the related caches.
			if got, err := r.ListRelated(secrets, "ns", labels.Everything()); err != nil || len(got) != 4 {
				t.Errorf("ListRelated(secrets) = %d objects (%v), want 4", len(got), err)
			}
			if tc.hold == nil {
				if got, err := r.List(foos, "ns", labels.Everything()); err != nil || len(got) != tc.owned[foos] {
					t.Errorf("List(foos) = %d objects (%v), want %d", len(got), err, tc.owned[foos])
				}
			}
			// Objects are read from every cache, each once.
			for _, name := range []string{"p1", "p3", "p"}[:min(tc.owned[foos], 3)] {
				if _, err := r.Object(foos, "ns", name); err != nil {
					t.Errorf("Object(foos, %s): %v", name, err)
				}
			}
			if got, err := r.Orphans(configMaps, "ns", labels.Everything()); err != nil || len(got) != tc.owned[configMaps] {
				t.Errorf("Orphans(configmaps) = %d objects (%v), want %d", len(got), err, tc.owned[configMaps])
			}
			for _, n := range tc.hold {
				r.Release(n)
			}
			if _, err := r.Object(foos, "ns", "p1"); tc.hold != nil && err == nil {
				t.Error("partition 1 released, its objects are still read")
			}
			if _, ok, _ := r.RelatedInformer(namespacesGVR).GetIndexer().GetByKey("ns"); !ok {
				t.Error("RelatedInformer(namespaces) does not hold ns")
			}

			// The controller gone, no informer runs in either set.
			r.only(ctl.Name)
			if got, rel := r.Cached(), r.related.cached(); len(got) != 0 || len(rel) != 0 {
				t.Errorf("with the controller gone, caches %v and %v still run", got, rel)
			}
		})
	}
}

// TestParentsOnly: a dispatcher's registry caches the parents and no child
// or revision, lists them without watching to learn that it may, and fails
// the controller, naming the permission, when the API server refuses.
func TestParentsOnly(t *testing.T) {
	ctl := &core.Controller{
		Name:     "c",
		Parent:   core.Resource{GVR: foos},
		Children: []core.Child{{Resource: core.Resource{GVR: configMaps}, Method: v1alpha1.ChildUpdateRollingRecreate}},
	}
	for _, refused := range []bool{false, true} {
		var objs []runtime.Object
		for _, kind := range []struct{ apiVersion, kind string }{{"example.com/v1", "Foo"}, {"v1", "ConfigMap"}} {
			for _, name := range []string{"a", "b"} {
				u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": kind.apiVersion, "kind": kind.kind}}
				u.SetNamespace("ns")
				u.SetName(name)
				objs = append(objs, u)
			}
		}
		dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
			foos: "FooList", configMaps: "ConfigMapList", v1alpha1.RevisionResource: "ControllerRevisionList",
		}, objs...)
		var mu sync.Mutex
		var asked []string
		dyn.PrependReactor("list", "*", func(a ktesting.Action) (bool, runtime.Object, error) {
			mu.Lock()
			defer mu.Unlock()
			asked = append(asked, "list "+a.GetResource().Resource)
			if refused && a.GetResource() == v1alpha1.RevisionResource {
				return true, nil, apierrors.NewForbidden(v1alpha1.RevisionResource.GroupResource(), "", errors.New("no"))
			}
			return false, nil, nil
		})
		dyn.PrependWatchReactor("*", func(a ktesting.Action) (bool, watch.Interface, error) {
			mu.Lock()
			defer mu.Unlock()
			asked = append(asked, "watch "+a.GetResource().Resource)
			return false, nil, nil
		})
		r := New(dyn, &fakediscovery.FakeDiscovery{Fake: &ktesting.Fake{}}, slog.New(slog.DiscardHandler), WithParentsOnly())
		err := r.startInformers(t.Context(), ctl)
		if refused {
			const want = "controller c: cannot list controllerrevisions.universalcontroller.dev in the cluster: forbidden (uc's ServiceAccount needs list and watch on controllerrevisions.universalcontroller.dev)"
			if err == nil || !strings.HasPrefix(err.Error(), want) {
				t.Errorf("with revisions refused: %v, want %q", err, want)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if got, want := r.Cached(), map[schema.GroupVersionResource]int{foos: 2}; !maps.Equal(got, want) {
			t.Errorf("Cached() = %v, want %v", got, want)
		}
		mu.Lock()
		slices.Sort(asked)
		if want := []string{"list configmaps", "list controllerrevisions", "list foos", "watch foos"}; !slices.Equal(asked, want) {
			t.Errorf("asked the API server %q, want %q", asked, want)
		}
		mu.Unlock()
		r.only(ctl.Name)
	}
}
