package core

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"universalcontroller.dev/uc/internal/objtest"
	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

func TestContains(t *testing.T) {
	tests := []struct {
		name       string
		live, want any
		ok         bool
	}{
		{"equal scalars", "a", "a", true},
		{"different scalars", "a", "b", false},
		{"int and float of one value", int64(3), float64(3), true},
		{"different numbers", int64(3), int64(4), false},
		{"defaults in live are ignored", map[string]any{"a": "x", "b": "default"}, map[string]any{"a": "x"}, true},
		{"missing field", map[string]any{"b": "y"}, map[string]any{"a": "x"}, false},
		{"null wanted matches absent", map[string]any{}, map[string]any{"creationTimestamp": nil}, true},
		{"empty map wanted matches absent", map[string]any{}, map[string]any{"resources": map[string]any{}}, true},
		{"lists element by element", []any{map[string]any{"name": "c", "image": "i", "pull": "Always"}}, []any{map[string]any{"name": "c", "image": "i"}}, true},
		{"list lengths differ", []any{"a", "b"}, []any{"a"}, false},
		{"objects added by the server do not count", []any{map[string]any{"name": "data"}, map[string]any{"name": "kube-api-access"}}, []any{map[string]any{"name": "data"}}, true},
		{"wanted objects in another order", []any{map[string]any{"name": "b"}, map[string]any{"name": "a"}}, []any{map[string]any{"name": "a"}, map[string]any{"name": "b"}}, false},
		{"a wanted object missing", []any{map[string]any{"name": "a"}}, []any{map[string]any{"name": "a"}, map[string]any{"name": "b"}}, false},
		{"list element differs", []any{map[string]any{"image": "old"}}, []any{map[string]any{"image": "new"}}, false},
		{"type differs", map[string]any{"a": "1"}, map[string]any{"a": int64(1)}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Contains(tt.live, tt.want); got != tt.ok {
				t.Errorf("contains(%v, %v) = %v, want %v", tt.live, tt.want, got, tt.ok)
			}
		})
	}
}

func testController(method v1alpha1.ChildUpdateMethod) *Controller {
	yes := true
	return &Controller{
		Name: "test",
		Spec: v1alpha1.UniversalControllerSpec{GenerateSelector: &yes},
		Parent: Resource{
			GVR:        schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "parents"},
			GVK:        schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Parent"},
			Namespaced: true,
		},
		Children: []Child{{
			Resource: Resource{
				GVR:        schema.GroupVersionResource{Version: "v1", Resource: "configmaps"},
				GVK:        schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"},
				Namespaced: true,
			},
			Method: method,
		}},
	}
}

func TestPlan(t *testing.T) {
	parent := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Parent"}}
	parent.SetNamespace("ns")
	parent.SetName("p")
	parent.SetUID("parent-uid")
	cm := func(name, v string) *unstructured.Unstructured {
		return object("ConfigMap", "", name, map[string]any{"k": v}, "")
	}
	// applied is cm as the applier applied it earlier.
	applied := func(name, v string, method v1alpha1.ChildUpdateMethod) *unstructured.Unstructured {
		ctl := testController(method)
		o, err := desiredObject(ctl, parent, &ctl.Children[0], cm(name, v), ownerRef(ctl, parent))
		if err != nil {
			t.Fatal(err)
		}
		o.SetUID(types.UID("uid-" + name))
		return o
	}
	tests := []struct {
		name    string
		method  v1alpha1.ChildUpdateMethod
		live    fakeLive
		desired []*unstructured.Unstructured
		want    []string // write strings
		err     string
	}{
		{name: "create", method: v1alpha1.ChildUpdateInPlace, desired: []*unstructured.Unstructured{cm("a", "1")},
			want: []string{"create configmaps ns/a"}},
		{name: "unchanged child writes nothing", method: v1alpha1.ChildUpdateInPlace,
			live:    fakeLive{applied("a", "1", v1alpha1.ChildUpdateInPlace)},
			desired: []*unstructured.Unstructured{cm("a", "1")}},
		{name: "a field dropped from the desired object is an update", method: v1alpha1.ChildUpdateInPlace,
			live:    fakeLive{applied("a", "1", v1alpha1.ChildUpdateInPlace)},
			desired: []*unstructured.Unstructured{object("ConfigMap", "", "a", map[string]any{}, "")},
			want:    []string{"apply configmaps ns/a"}},
		{name: "a field changed by someone else is put back", method: v1alpha1.ChildUpdateInPlace,
			live: fakeLive{func() *unstructured.Unstructured {
				o := applied("a", "1", v1alpha1.ChildUpdateInPlace)
				o.Object["data"] = map[string]any{"k": "drifted"}
				return o
			}()},
			desired: []*unstructured.Unstructured{cm("a", "1")}, want: []string{"apply configmaps ns/a"}},
		{name: "defaults and others' fields are no difference", method: v1alpha1.ChildUpdateRecreate,
			live: fakeLive{func() *unstructured.Unstructured {
				o := applied("a", "1", v1alpha1.ChildUpdateRecreate)
				o.Object["data"] = map[string]any{"k": "1", "added-by-someone": "x"}
				o.Object["immutable"] = false
				return o
			}()},
			desired: []*unstructured.Unstructured{cm("a", "1")}},
		{name: "a child uc never applied that holds every desired field is unchanged", method: v1alpha1.ChildUpdateRecreate,
			live: fakeLive{func() *unstructured.Unstructured {
				o := applied("a", "1", v1alpha1.ChildUpdateRecreate)
				o.SetAnnotations(nil)
				return o
			}()},
			desired: []*unstructured.Unstructured{cm("a", "1")}},
		{name: "a child uc never applied that lacks a desired field is recreated", method: v1alpha1.ChildUpdateRecreate,
			live: fakeLive{func() *unstructured.Unstructured {
				o := applied("a", "1", v1alpha1.ChildUpdateRecreate)
				o.SetAnnotations(nil)
				o.Object["data"] = map[string]any{"k": "0"}
				return o
			}()},
			desired: []*unstructured.Unstructured{cm("a", "1")}, want: []string{"delete configmaps ns/a"}},
		{name: "owned child that stops matching the selector is released", method: v1alpha1.ChildUpdateInPlace,
			live: fakeLive{func() *unstructured.Unstructured {
				o := applied("a", "1", v1alpha1.ChildUpdateInPlace)
				o.SetLabels(map[string]string{"other": "label"})
				return o
			}()},
			want: []string{"release configmaps ns/a"}},
		{name: "in place update", method: v1alpha1.ChildUpdateInPlace,
			live:    fakeLive{object("ConfigMap", "ns", "a", map[string]any{"k": "1"}, "parent-uid")},
			desired: []*unstructured.Unstructured{cm("a", "2")}, want: []string{"apply configmaps ns/a"}},
		{name: "on delete never updates", method: v1alpha1.ChildUpdateOnDelete,
			live:    fakeLive{object("ConfigMap", "ns", "a", map[string]any{"k": "1"}, "parent-uid")},
			desired: []*unstructured.Unstructured{cm("a", "2")}},
		{name: "recreate deletes first", method: v1alpha1.ChildUpdateRecreate,
			live:    fakeLive{object("ConfigMap", "ns", "a", map[string]any{"k": "1"}, "parent-uid")},
			desired: []*unstructured.Unstructured{cm("a", "2")}, want: []string{"delete configmaps ns/a"}},
		{name: "an orphan the selector matches is adopted", method: v1alpha1.ChildUpdateOnDelete,
			live:    fakeLive{claimable(object("ConfigMap", "ns", "a", map[string]any{"k": "1"}, ""))},
			desired: []*unstructured.Unstructured{cm("a", "1")}, want: []string{"apply configmaps ns/a"}},
		{name: "an orphan being deleted is left to go", method: v1alpha1.ChildUpdateInPlace,
			live: fakeLive{func() *unstructured.Unstructured {
				o := claimable(object("ConfigMap", "ns", "a", nil, ""))
				now := metav1.Now()
				o.SetDeletionTimestamp(&now)
				return o
			}()},
			desired: []*unstructured.Unstructured{cm("a", "1")}},
		{name: "an orphan the selector does not match rejects the reply", method: v1alpha1.ChildUpdateInPlace,
			live: fakeLive{func() *unstructured.Unstructured {
				o := object("ConfigMap", "ns", "victim", map[string]any{"secret": "do-not-touch"}, "")
				o.SetLabels(map[string]string{"app": "victim"})
				return o
			}()},
			desired: []*unstructured.Unstructured{cm("victim", "1")},
			err:     `children[0] ConfigMap.v1 "victim": an object of that name exists, is controlled by no one and its labels map[app:victim] do not match`},
		{name: "an orphan without labels rejects the reply", method: v1alpha1.ChildUpdateInPlace,
			live:    fakeLive{object("ConfigMap", "ns", "a", nil, "")},
			desired: []*unstructured.Unstructured{cm("b", "1"), cm("a", "1")}, err: `children[1] ConfigMap.v1 "a": an object of that name exists, is controlled by no one`},
		{name: "an orphan the selector claims but the hook does not want is deleted", method: v1alpha1.ChildUpdateInPlace,
			live: fakeLive{func() *unstructured.Unstructured {
				o := object("ConfigMap", "ns", "stray", nil, "")
				o.SetLabels(map[string]string{v1alpha1.LabelControllerUID: "parent-uid"})
				return o
			}()},
			want: []string{"delete configmaps ns/stray"}},
		{name: "undesired child is deleted", method: v1alpha1.ChildUpdateInPlace,
			live: fakeLive{object("ConfigMap", "ns", "old", nil, "parent-uid")}, want: []string{"delete configmaps ns/old"}},
		{name: "an object in another namespace naming the parent as owner is not its child", method: v1alpha1.ChildUpdateInPlace,
			live: fakeLive{object("ConfigMap", "elsewhere", "old", nil, "parent-uid")}},
		{name: "others' children are left alone", method: v1alpha1.ChildUpdateInPlace,
			live: fakeLive{object("ConfigMap", "ns", "theirs", nil, "other-uid")}},
		{name: "undeclared kind rejects the reply", method: v1alpha1.ChildUpdateInPlace,
			desired: []*unstructured.Unstructured{cm("a", "1"), object("Secret", "", "s", nil, "")},
			err:     `children[1] Secret.v1 "s": kind not declared in childResources`},
		{name: "other namespace rejects the reply", method: v1alpha1.ChildUpdateInPlace,
			desired: []*unstructured.Unstructured{object("ConfigMap", "kube-system", "a", nil, "")},
			err:     `outside the parent's namespace`},
		{name: "child of another controller rejects the reply", method: v1alpha1.ChildUpdateInPlace,
			live:    fakeLive{object("ConfigMap", "ns", "a", nil, "other-uid")},
			desired: []*unstructured.Unstructured{cm("a", "1")}, err: "already controlled by Parent p: uc does not take it over"},
		{name: "a child listed twice rejects the reply", method: v1alpha1.ChildUpdateInPlace,
			desired: []*unstructured.Unstructured{cm("a", "1"), cm("a", "2")}, err: "listed twice"},
		{name: "a child without a name rejects the reply", method: v1alpha1.ChildUpdateInPlace,
			desired: []*unstructured.Unstructured{cm("", "1")}, err: "has no metadata.name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			actions, err := Plan(testController(tt.method), parent, &hooks.SyncResponse{Children: tt.desired}, tt.live)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want one containing %q", err, tt.err)
				}
				if actions != nil {
					t.Fatalf("a rejected reply planned %v", actions)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, a := range actions {
				got = append(got, a.String())
			}
			if strings.Join(got, ";") != strings.Join(tt.want, ";") {
				t.Fatalf("actions = %q, want %q", got, tt.want)
			}
			for _, a := range actions {
				if a.Verb == VerbApply || a.Verb == VerbCreate {
					ref := metav1.GetControllerOf(a.Object)
					if ref == nil || ref.UID != "parent-uid" {
						t.Errorf("applied object is not controlled by the parent: %v", a.Object.GetOwnerReferences())
					}
				}
			}
		})
	}
}

// countingCache counts the objects read one by one from a cache.
type countingCache struct {
	fakeLive
	reads *int
}

func (c countingCache) Object(gvr schema.GroupVersionResource, namespace, name string) (*unstructured.Unstructured, error) {
	*c.reads++
	return c.fakeLive.Object(gvr, namespace, name)
}

// TestPlanReadsEachChildOnce: a desired child the parent owns is taken
// from the parent's objects, read (decoded, from uc's caches) once per
// plan; only one it does not own is read by its name.
func TestPlanReadsEachChildOnce(t *testing.T) {
	parent := objtest.Parent()
	desired := func() []*unstructured.Unstructured {
		return []*unstructured.Unstructured{object("ConfigMap", "", "a", nil, ""), object("ConfigMap", "", "b", nil, ""), object("ConfigMap", "", "c", nil, "")}
	}
	live := fakeLive{object("ConfigMap", "ns", "a", nil, "parent-uid"), object("ConfigMap", "ns", "b", nil, "parent-uid")}
	reads := 0
	if _, err := Plan(testController(v1alpha1.ChildUpdateInPlace), parent, &hooks.SyncResponse{Children: desired()}, countingCache{live, &reads}); err != nil {
		t.Fatal(err)
	}
	if reads != 1 {
		t.Errorf("read %d objects by name, want 1 (c, which the parent does not own)", reads)
	}
}

func TestPlanWithTheParentsSelector(t *testing.T) {
	ctl := testController(v1alpha1.ChildUpdateInPlace)
	ctl.Spec.GenerateSelector = nil
	parent := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Parent"}}
	parent.SetNamespace("ns")
	parent.SetName("p")
	parent.SetUID("parent-uid")
	labelled := func(lbls map[string]string) *unstructured.Unstructured {
		o := object("ConfigMap", "", "a", nil, "")
		o.SetLabels(lbls)
		return o
	}
	tests := []struct {
		name     string
		selector any
		child    *unstructured.Unstructured
		err      string
	}{
		{"matching labels", map[string]any{"matchLabels": map[string]any{"app": "web"}}, labelled(map[string]string{"app": "web"}), ""},
		{"labels that do not match", map[string]any{"matchLabels": map[string]any{"app": "web"}}, labelled(map[string]string{"app": "db"}), `do not match the parent's selector "app=web"`},
		{"no selector", nil, labelled(nil), "no spec.selector"},
		{"empty selector", map[string]any{}, labelled(nil), "no spec.selector"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := parent.DeepCopy()
			if tt.selector != nil {
				p.Object["spec"] = map[string]any{"selector": tt.selector}
			}
			_, err := Plan(ctl, p, &hooks.SyncResponse{Children: []*unstructured.Unstructured{tt.child}}, fakeLive{})
			if (err == nil) != (tt.err == "") || (err != nil && !strings.Contains(err.Error(), tt.err)) {
				t.Fatalf("err = %v, want %q", err, tt.err)
			}
		})
	}
}
