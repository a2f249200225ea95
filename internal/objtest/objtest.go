// Package objtest makes the objects that tests of uc's decisions and roles
// observe: a parent, its ConfigMap children, revisions, replies, and a
// core.Cache (Live) of live objects held in a slice. It knows no
// controller, so the core's own tests use it too.
package objtest

import (
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"universalcontroller.dev/uc/internal/revision"
	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// Parent is the example.com/v1 Parent "p" (UID parent-uid) in namespace
// ns, of the controller core/coretest makes.
func Parent() *unstructured.Unstructured {
	parent := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Parent"}}
	parent.SetNamespace("ns")
	parent.SetName("p")
	parent.SetUID("parent-uid")
	return parent
}

// Object is a v1 object of kind with data, controlled by the Parent of
// UID owner unless owner is "".
func Object(kind, ns, name string, data map[string]any, owner types.UID) *unstructured.Unstructured {
	o := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": kind, "data": data}}
	o.SetNamespace(ns)
	o.SetName(name)
	o.SetUID(types.UID("uid-" + name))
	if owner != "" {
		o.SetLabels(map[string]string{v1alpha1.LabelControllerUID: string(owner)})
		yes := true
		o.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "example.com/v1", Kind: "Parent", Name: "p", UID: owner, Controller: &yes}})
	}
	return o
}

// Rev is the revision of hash, number n, of the ConfigMaps names.
func Rev(hash string, n int64, names ...string) *revision.Revision {
	r := &revision.Revision{Hash: hash, ControllerRevision: &v1alpha1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{Name: revision.Name("p", hash), Namespace: "ns"},
		Revision:   n,
	}}
	for _, name := range names {
		r.Add("", "ConfigMap", name)
	}
	return r
}

// Wants is a reply wanting ConfigMaps name=version, in that order.
func Wants(pairs ...string) *hooks.SyncResponse {
	resp := &hooks.SyncResponse{}
	for _, p := range pairs {
		name, v, _ := strings.Cut(p, "=")
		resp.Children = append(resp.Children, Object("ConfigMap", "", name, map[string]any{"v": v}, ""))
	}
	return resp
}

// Ready is a live child of the Parent at version v, passing a Ready=True
// status check, or not.
func Ready(name, v string, ok bool) *unstructured.Unstructured {
	o := Object("ConfigMap", "ns", name, map[string]any{"v": v}, "parent-uid")
	status := "False"
	if ok {
		status = "True"
	}
	o.Object["status"] = map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": status}}}
	return o
}

// Live is a core.Cache of the objects it holds; an object's resource is
// its kind in lower case and plural (ConfigMap, configmaps).
type Live []*unstructured.Unstructured

// isOf tells whether o is an object of resource, its kind in lower case
// and plural, without allocating (the bench of a thousand children
// measures the core, not the fake).
func isOf(o *unstructured.Unstructured, resource string) bool {
	k := o.GetKind()
	return len(resource) == len(k)+1 && resource[len(k)] == 's' && strings.EqualFold(resource[:len(k)], k)
}

// Owned lists the objects of gvr in ns ("" for all) that owner controls.
func (l Live) Owned(gvr schema.GroupVersionResource, ns string, owner types.UID) ([]*unstructured.Unstructured, error) {
	return l.filter(gvr, ns, func(o *unstructured.Unstructured) bool {
		ref := metav1.GetControllerOfNoCopy(o)
		return ref != nil && ref.UID == owner
	}), nil
}

// Orphans lists the objects of gvr in ns ("" for all) that nothing controls.
func (l Live) Orphans(gvr schema.GroupVersionResource, ns string, _ labels.Selector) ([]*unstructured.Unstructured, error) {
	return l.filter(gvr, ns, func(o *unstructured.Unstructured) bool { return metav1.GetControllerOfNoCopy(o) == nil }), nil
}

// Object returns the object of gvr named ns/name, or a NotFound error.
func (l Live) Object(gvr schema.GroupVersionResource, ns, name string) (*unstructured.Unstructured, error) {
	for _, o := range l.filter(gvr, ns, func(o *unstructured.Unstructured) bool { return o.GetName() == name }) {
		if o.GetNamespace() == ns {
			return o, nil
		}
	}
	return nil, apierrors.NewNotFound(gvr.GroupResource(), name)
}

func (l Live) filter(gvr schema.GroupVersionResource, ns string, keep func(*unstructured.Unstructured) bool) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range l {
		if isOf(o, gvr.Resource) && (ns == "" || o.GetNamespace() == ns) && keep(o) {
			out = append(out, o)
		}
	}
	return out
}

// Claimable labels o so that the Parent's generated selector matches it.
func Claimable(o *unstructured.Unstructured) *unstructured.Unstructured {
	o.SetLabels(map[string]string{v1alpha1.LabelControllerUID: "parent-uid"})
	return o
}
