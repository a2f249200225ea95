package registry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	ktesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"universalcontroller.dev/uc/core"
	"universalcontroller.dev/uc/internal/compact"
)

// TestInformerSetIsShared: one informer per resource type whatever the
// number of users, stopped when its last user goes.
func TestInformerSetIsShared(t *testing.T) {
	cms := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		cms: "ConfigMapList", foos: "FooList",
	})
	s := newInformerSet(dyn)
	running := func() map[schema.GroupVersionResource]int {
		out := map[schema.GroupVersionResource]int{}
		for gvr, e := range s.byGVR {
			if e.stop != nil {
				out[gvr] = len(e.users)
			}
		}
		return out
	}
	first := s.get(cms)
	for _, user := range []string{"a", "b", "c", "d", "e"} {
		s.use(user, foos, cms)
	}
	if got := running(); len(got) != 2 || got[cms] != 5 {
		t.Fatalf("5 users of 2 kinds run %v, want 2 informers with 5 users each", got)
	}
	if s.get(cms) != first {
		t.Fatal("a second informer was made for one kind")
	}
	s.only("a", cms) // a stops using foos
	for _, user := range []string{"b", "c", "d", "e"} {
		s.only(user)
	}
	if got := running(); len(got) != 1 || got[cms] != 1 {
		t.Fatalf("after the others left, %v run, want configmaps for a", got)
	}
	s.only("a")
	if got := running(); len(got) != 0 {
		t.Fatalf("with no users, %v still run", got)
	}
}

// TestInformersHoldCompactObjects: objects enter the shared caches compact
// and without their managedFields, and decode whole.
func TestInformersHoldCompactObjects(t *testing.T) {
	cms := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	cm := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{
			"name": "c", "namespace": "ns",
			"managedFields": []any{map[string]any{"manager": "uc/x", "operation": "Apply", "fieldsType": "FieldsV1"}},
		},
		"data": map[string]any{"k": "v"},
	}}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{cms: "ConfigMapList"}, cm)
	s := newInformerSet(dyn)
	s.use("a", cms)
	defer s.only("a")
	if err := s.waitSynced(t.Context(), cms); err != nil {
		t.Fatal(err)
	}
	got, _, err := s.get(cms).GetIndexer().GetByKey("ns/c")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := got.(*compact.Object); !ok {
		t.Fatalf("cached a %T, want a compact object", got)
	}
	u, err := compact.Decode(got)
	if err != nil {
		t.Fatal(err)
	}
	if mf := u.GetManagedFields(); mf != nil {
		t.Errorf("cached object has managedFields %v", mf)
	}
	if v, _, _ := unstructured.NestedString(u.Object, "data", "k"); v != "v" {
		t.Errorf("cached object lost its data: %v", u.Object)
	}
}

// TestStoppedSetWaitsNoMore: waiting on a stopped set's caches fails at
// once and makes no informer (a partition's group replaced while an apply
// waits for it).
func TestStoppedSetWaitsNoMore(t *testing.T) {
	cms := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	s := newInformerSet(dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{cms: "ConfigMapList"}))
	s.use("a", cms)
	s.stopAll()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := s.waitSynced(ctx, cms); !errors.Is(err, errSetStopped) {
		t.Errorf("waiting on a stopped set: %v, want %v", err, errSetStopped)
	}
	if len(s.byGVR) > 0 {
		t.Errorf("a stopped set made informers: %v", s.byGVR)
	}
}

// TestOwnedStaysInTheOwnersNamespace: an object in another namespace that
// names a namespaced parent as its controller is not the parent's child;
// a cluster-scoped parent's children are in any namespace.
func TestOwnedStaysInTheOwnersNamespace(t *testing.T) {
	r, inf := configMapsIndexed(t, ownerIndex, indexByController)
	child := func(namespace, name string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}}
		u.SetNamespace(namespace)
		u.SetName(name)
		u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "example.com/v1", Kind: "Parent", Name: "p", UID: "parent-uid", Controller: ptr.To(true)}})
		return u
	}
	for _, u := range []*unstructured.Unstructured{child("team-a", "mine"), child("team-b", "planted")} {
		if err := inf.GetIndexer().Add(u); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		namespace string
		want      []string
	}{
		{"team-a", []string{"team-a/mine"}},
		{"", []string{"team-a/mine", "team-b/planted"}},
	} {
		for name, c := range map[string]core.Cache{"Owned": r, "ForRequests().Owned": r.ForRequests()} {
			owned, err := c.Owned(configMaps, tc.namespace, "parent-uid")
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, u := range owned {
				got = append(got, u.GetNamespace()+"/"+u.GetName())
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("%s in %q: %v, want %v", name, tc.namespace, got, tc.want)
			}
		}
	}
}

// TestOrphansSelected: Orphans returns, decoded, the uncontrolled objects
// the selector selects in the namespace, and only them.
func TestOrphansSelected(t *testing.T) {
	r, inf := configMapsIndexed(t, orphanIndex, indexOrphans)
	for _, cm := range []struct {
		namespace, name string
		labels          map[string]string
	}{
		{"team-a", "adoptable", map[string]string{"app": "web"}},
		{"team-a", "kube-root-ca.crt", nil},
		{"team-b", "elsewhere", map[string]string{"app": "web"}},
	} {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "data": map[string]any{"k": cm.name}}}
		u.SetNamespace(cm.namespace)
		u.SetName(cm.name)
		u.SetLabels(cm.labels)
		obj, err := compact.Transform(u)
		if err != nil {
			t.Fatal(err)
		}
		if err := inf.GetIndexer().Add(obj); err != nil {
			t.Fatal(err)
		}
	}
	got, err := r.Orphans(configMaps, "team-a", labels.SelectorFromSet(labels.Set{"app": "web"}))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].GetName() != "adoptable" || got[0].Object["data"].(map[string]any)["k"] != "adoptable" {
		t.Fatalf("orphans %v, want team-a/adoptable decoded whole", got)
	}
	// For a request, the same object, encoded as the whole one is.
	enc, err := r.ForRequests().Orphans(configMaps, "team-a", labels.SelectorFromSet(labels.Set{"app": "web"}))
	if err != nil {
		t.Fatal(err)
	}
	if len(enc) != 1 || enc[0].GetName() != "adoptable" {
		t.Fatalf("orphans for requests %v, want team-a/adoptable", enc)
	}
	want, _ := json.Marshal(got[0].Object)
	if data, err := json.Marshal(enc[0].Object); err != nil || !bytes.Equal(data, want) {
		t.Errorf("an orphan for requests encodes as %s (%v), want %s", data, err, want)
	}
}

var configMaps = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

// configMapsIndexed is a registry on a fake cluster, and its informer of
// ConfigMaps, not started, with the index of that name.
func configMapsIndexed(t *testing.T, index string, fn cache.IndexFunc) (*Registry, cache.SharedIndexInformer) {
	t.Helper()
	r := New(dynamicfake.NewSimpleDynamicClient(runtime.NewScheme()), &fakediscovery.FakeDiscovery{Fake: &ktesting.Fake{}}, slog.New(slog.DiscardHandler))
	inf := r.Informer(configMaps)
	if err := inf.AddIndexers(cache.Indexers{index: fn}); err != nil {
		t.Fatal(err)
	}
	return r, inf
}

// TestRelatedLetGoOnRegistration: a controller registered anew lets go of
// its related resources (its customize hook is asked again, and Watch
// follows them again); meanwhile their caches read as not watched, never as
// empty.
func TestRelatedLetGoOnRegistration(t *testing.T) {
	secrets := schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	ctl := &core.Controller{Name: "c", Parent: core.Resource{GVR: configMaps}}
	secret := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret"}}
	secret.SetNamespace("ns")
	secret.SetName("s")
	for _, tc := range []struct {
		name string
		opts []Option
	}{
		{name: "one set of informers"},
		{name: "a shard's, related apart", opts: []Option{WithPartitions([]int{0})}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
				configMaps: "ConfigMapList", secrets: "SecretList",
			}, secret)
			r := New(dyn, &fakediscovery.FakeDiscovery{Fake: &ktesting.Fake{}}, slog.New(slog.DiscardHandler), tc.opts...)
			defer r.only(ctl.Name)
			related := func(want bool) {
				t.Helper()
				objs, err := r.ListRelated(secrets, "", labels.Everything())
				if got := r.Watching(ctl.Name, secrets); got != want {
					t.Fatalf("Watching = %v, want %v", got, want)
				}
				switch {
				case want && (err != nil || len(objs) != 1):
					t.Fatalf("ListRelated = %d objects, %v; want the secret", len(objs), err)
				case !want && err == nil:
					t.Fatalf("ListRelated = %d objects and no error from a cache not watched", len(objs))
				}
			}
			for range []string{"registered", "registered anew: a new generation"} {
				if err := r.startInformers(t.Context(), ctl); err != nil {
					t.Fatal(err)
				}
				related(false)
				if err := r.Watch(t.Context(), ctl.Name, secrets); err != nil {
					t.Fatal(err)
				}
				related(true)
			}
		})
	}
}
