package applier

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	fakedynamic "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/tools/record"

	"universalcontroller.dev/uc/core"
	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// labelRegistry is the registry as the labeller reads it: one controller,
// and cached objects.
type labelRegistry struct {
	Registry
	ctl  *core.Controller
	objs []*unstructured.Unstructured
}

func (r labelRegistry) Get(name string) (*core.Controller, bool) { return r.ctl, name == r.ctl.Name }

func (r labelRegistry) Meta(gvr schema.GroupVersionResource, namespace, name string) (metav1.Object, error) {
	for _, o := range r.objs {
		if strings.EqualFold(o.GetKind()+"s", gvr.Resource) && o.GetNamespace() == namespace && o.GetName() == name {
			return o, nil
		}
	}
	return nil, apierrors.NewNotFound(gvr.GroupResource(), name)
}

func (r labelRegistry) Owned(gvr schema.GroupVersionResource, namespace string, owner types.UID) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, o := range r.objs {
		if ref := metav1.GetControllerOf(o); ref != nil && ref.UID == owner && strings.EqualFold(o.GetKind()+"s", gvr.Resource) && o.GetNamespace() == namespace {
			out = append(out, o)
		}
	}
	return out, nil
}

// labelFixture is a controller of Parents with ConfigMap children, over 8
// partitions, one parent "p" labelled with partition parentLabel and its
// child "c" labelled with childLabel.
func labelFixture(parentLabel, childLabel string) (parentGVR, cmGVR schema.GroupVersionResource, ctl *core.Controller, parent, child *unstructured.Unstructured) {
	parentGVR = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "parents"}
	cmGVR = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	ctl = &core.Controller{
		Name: "c", Partitions: 8, ParentSelector: labels.Everything(),
		Parent:   core.Resource{GVR: parentGVR, GVK: schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Parent"}, Namespaced: true},
		Children: []core.Child{{Resource: core.Resource{GVR: cmGVR, GVK: schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, Namespaced: true}}},
	}
	parent = &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Parent"}}
	parent.SetNamespace("ns")
	parent.SetName("p")
	parent.SetUID("uid-p")
	parent.SetLabels(map[string]string{v1alpha1.LabelPartition: parentLabel})
	child = &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}}
	child.SetNamespace("ns")
	child.SetName("c")
	child.SetLabels(map[string]string{v1alpha1.LabelPartition: childLabel})
	yes := true
	child.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "example.com/v1", Kind: "Parent", Name: "p", UID: "uid-p", Controller: &yes}})
	return parentGVR, cmGVR, ctl, parent, child
}

// TestLabellerParentGone: when a parent leaves a replica's partitioned
// caches, its children still cached there, labelled with a partition the
// replica holds, are checked again if the parent still exists (moved to
// another partition), and left to the garbage collector if it is gone.
func TestLabellerParentGone(t *testing.T) {
	parentGVR, cmGVR, ctl, parent, child := labelFixture("6", "3")
	for _, tc := range []struct {
		name   string
		exists bool
		queued int
	}{
		{"moved to another partition: its child is checked", true, 1},
		{"deleted: its child is left to the garbage collector", false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var objs []runtime.Object
			if tc.exists {
				objs = append(objs, parent.DeepCopy())
			}
			dyn := fakedynamic.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
				map[schema.GroupVersionResource]string{parentGVR: "ParentList", cmGVR: "ConfigMapList"}, objs...)
			reg := labelRegistry{ctl: ctl, objs: []*unstructured.Unstructured{child}}
			l := newLabeller(reg, dyn, record.NewFakeRecorder(10), 8, func(n int) bool { return n == 3 }, true, slog.New(slog.DiscardHandler))
			defer l.queue.ShutDown()
			k := labelKey{controller: "c", gvr: parentGVR, namespace: "ns", name: "p", parent: true, gone: true, uid: "uid-p"}
			if err := l.sync(context.Background(), k); err != nil {
				t.Fatal(err)
			}
			if got := l.queue.Len(); got != tc.queued {
				t.Errorf("%d objects queued, want %d", got, tc.queued)
			}
		})
	}
}

// TestLabeller: which objects the labeller labels, with what, and what it
// tells.
func TestLabeller(t *testing.T) {
	const partitions = 8
	parentGVR := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "parents"}
	cmGVR := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	ctl := &core.Controller{
		Name: "c", Partitions: partitions, ParentSelector: labels.SelectorFromSet(labels.Set{"app": "x"}),
		Parent:   core.Resource{GVR: parentGVR, GVK: schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Parent"}, Namespaced: true},
		Children: []core.Child{{Resource: core.Resource{GVR: cmGVR, GVK: schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, Namespaced: true}}},
	}
	partitionOf := func(uid types.UID) string { return strconv.Itoa(bus.Partition(uid, partitions)) }
	obj := func(kind, name string, uid types.UID, lbls map[string]string, owner *unstructured.Unstructured) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": kind}}
		if kind == "Parent" {
			u.SetAPIVersion("example.com/v1")
		}
		u.SetNamespace("ns")
		u.SetName(name)
		u.SetUID(uid)
		u.SetResourceVersion("7")
		u.SetLabels(lbls)
		if owner != nil {
			yes := true
			u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: owner.GetAPIVersion(), Kind: owner.GetKind(), Name: owner.GetName(), UID: owner.GetUID(), Controller: &yes}})
		}
		return u
	}
	parent := obj("Parent", "p", "uid-p", map[string]string{"app": "x"}, nil)
	moved := obj("Parent", "moved", "uid-moved", map[string]string{"app": "x", v1alpha1.LabelPartition: "5"}, nil)
	elsewhere := obj("Parent", "elsewhere", "uid-elsewhere", map[string]string{"app": "x", v1alpha1.LabelPartition: "6"}, nil)
	tests := []struct {
		name   string
		key    labelKey
		obj    *unstructured.Unstructured
		holds  bool
		want   string // the label patched; "" for no patch
		events int
		// removed is the label the handler saw someone remove.
		removed string
		// partitioned: the caches hold the partitions held only; server
		// is a parent in none of them, only on the API server.
		partitioned bool
		server      *unstructured.Unstructured
	}{
		{name: "a new parent gets its UID's partition", key: labelKey{parent: true, gvr: parentGVR},
			obj: parent, holds: true, want: partitionOf("uid-p")},
		{name: "a parent labelled with a partition keeps it", key: labelKey{parent: true, gvr: parentGVR},
			obj: moved, holds: true},
		{name: "a parent labelled with no partition is set back, with a Warning Event", key: labelKey{parent: true, gvr: parentGVR},
			obj: obj("Parent", "bad", "uid-bad", map[string]string{"app": "x", v1alpha1.LabelPartition: "99"}, nil), holds: true,
			want: partitionOf("uid-bad"), events: 1},
		{name: "a parent whose label someone removed gets it back, with a Warning Event", key: labelKey{parent: true, gvr: parentGVR},
			obj: parent, holds: true, removed: "6", want: partitionOf("uid-p"), events: 1},
		{name: "an object the parent selector does not select is left alone", key: labelKey{parent: true, gvr: parentGVR},
			obj: obj("Parent", "other", "uid-other", nil, nil), holds: true},
		{name: "another replica's parent is left to it", key: labelKey{parent: true, gvr: parentGVR},
			obj: parent, holds: false},
		{name: "a child made before sharding gets its parent's partition", key: labelKey{gvr: cmGVR},
			obj: obj("ConfigMap", "c1", "uid-c1", nil, parent), holds: true, want: partitionOf("uid-p")},
		{name: "a child follows its parent moved by hand", key: labelKey{gvr: cmGVR},
			obj: obj("ConfigMap", "c2", "uid-c2", map[string]string{v1alpha1.LabelPartition: partitionOf("uid-moved")}, moved), holds: true, want: "5"},
		{name: "a child relabelled by hand is set back", key: labelKey{gvr: cmGVR},
			obj: obj("ConfigMap", "c3", "uid-c3", map[string]string{v1alpha1.LabelPartition: "x"}, parent), holds: true, want: partitionOf("uid-p")},
		{name: "an object no parent controls is left alone", key: labelKey{gvr: cmGVR},
			obj: obj("ConfigMap", "c4", "uid-c4", nil, nil), holds: true},
		{name: "partitioned: a child labelled with a partition held follows its parent, in no cache, read from the API server", key: labelKey{gvr: cmGVR},
			obj: obj("ConfigMap", "c5", "uid-c5", map[string]string{v1alpha1.LabelPartition: "3"}, elsewhere), holds: true,
			partitioned: true, server: elsewhere, want: "6"},
		{name: "partitioned: a child of a parent gone is left to the garbage collector", key: labelKey{gvr: cmGVR},
			obj: obj("ConfigMap", "c6", "uid-c6", map[string]string{v1alpha1.LabelPartition: "3"}, elsewhere), holds: true,
			partitioned: true},
		{name: "partitioned: a child in no partition whose parent is in no cache is left to the parent's holder", key: labelKey{gvr: cmGVR},
			obj: obj("ConfigMap", "c7", "uid-c7", nil, elsewhere), holds: true,
			partitioned: true, server: elsewhere},
		{name: "unpartitioned: a child whose parent is not cached is left alone", key: labelKey{gvr: cmGVR},
			obj: obj("ConfigMap", "c8", "uid-c8", map[string]string{v1alpha1.LabelPartition: "3"}, elsewhere), holds: true,
			server: elsewhere},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs := []runtime.Object{tt.obj.DeepCopy()}
			if tt.server != nil {
				objs = append(objs, tt.server.DeepCopy())
			}
			dyn := fakedynamic.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
				map[schema.GroupVersionResource]string{parentGVR: "ParentList", cmGVR: "ConfigMapList"}, objs...)
			events := record.NewFakeRecorder(10)
			reg := labelRegistry{ctl: ctl, objs: []*unstructured.Unstructured{parent, moved, tt.obj}}
			l := newLabeller(reg, dyn, events, partitions, func(int) bool { return tt.holds }, tt.partitioned, slog.New(slog.DiscardHandler))
			tt.key.controller, tt.key.namespace, tt.key.name = "c", "ns", tt.obj.GetName()
			if tt.removed != "" {
				l.removed.Store(tt.key, removedLabel{tt.removed, tt.obj.GetUID()})
			}
			if err := l.sync(context.Background(), tt.key); err != nil {
				t.Fatal(err)
			}
			got, err := dyn.Resource(tt.key.gvr).Namespace("ns").Get(context.Background(), tt.obj.GetName(), metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			label := got.GetLabels()[v1alpha1.LabelPartition]
			switch {
			case tt.want == "" && label != tt.obj.GetLabels()[v1alpha1.LabelPartition]:
				t.Errorf("label changed to %q; want it left alone", label)
			case tt.want != "" && label != tt.want:
				t.Errorf("label %q, want %q", label, tt.want)
			}
			if len(events.Events) != tt.events {
				t.Errorf("%d events, want %d", len(events.Events), tt.events)
			}
		})
	}
}

// TestLabellerChildMovedWithinReplica: a child whose label someone changed
// from one partition a replica holds to another is, for a moment, in two
// of its caches, and the registry reads the first, stale copy: nothing to
// do yet. When the old cache drops it, it is checked again and labelled
// back.
func TestLabellerChildMovedWithinReplica(t *testing.T) {
	parentGVR, cmGVR, ctl, parent, stale := labelFixture("1", "1")
	stale.SetResourceVersion("7")
	edited := stale.DeepCopy()
	edited.SetResourceVersion("8")
	edited.SetLabels(map[string]string{v1alpha1.LabelPartition: "2"})

	dyn := fakedynamic.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{parentGVR: "ParentList", cmGVR: "ConfigMapList"}, parent.DeepCopy(), edited.DeepCopy())
	reg := &labelRegistry{ctl: ctl, objs: []*unstructured.Unstructured{parent, stale}}
	l := newLabeller(reg, dyn, record.NewFakeRecorder(10), 8, func(int) bool { return true }, true, slog.New(slog.DiscardHandler))
	defer l.queue.ShutDown()
	ctx := context.Background()
	drain := func() {
		for l.queue.Len() > 0 {
			k, _ := l.queue.Get()
			if err := l.sync(ctx, k); err != nil {
				t.Fatal(err)
			}
			l.queue.Done(k)
		}
	}
	label := func() string {
		got, err := dyn.Resource(cmGVR).Namespace("ns").Get(ctx, "c", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return got.GetLabels()[v1alpha1.LabelPartition]
	}
	h := l.handler(ctl, labelKey{controller: "c", gvr: cmGVR})

	h.OnAdd(edited, false) // partition 2's cache shows it first
	drain()
	if got := label(); got != "2" {
		t.Fatalf("labelled %q from the stale copy; the test reads nothing it means to", got)
	}
	reg.objs = []*unstructured.Unstructured{parent, edited}
	h.OnDelete(stale) // partition 1's cache drops it
	drain()
	if got := label(); got != "1" {
		t.Errorf("label %q, want %q: the child was not labelled back with its parent's partition", got, "1")
	}
}
