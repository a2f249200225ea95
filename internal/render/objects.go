package render

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// objects holds observed objects by resource, and finds them as uc finds
// them in its caches (a core.Cache): to claim a parent's children and to
// plan the writes.
type objects map[schema.GroupVersionResource][]*unstructured.Unstructured

// newObjects files each object under its resource, as mapper resolves its
// kind; a namespaced object without a namespace is in namespace. Like uc's
// caches, it drops their metadata.managedFields.
func newObjects(mapper meta.RESTMapper, objs []*unstructured.Unstructured, namespace string) (objects, error) {
	out := objects{}
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", gvk.Kind, o.GetName(), err)
		}
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace && o.GetNamespace() == "" {
			o.SetNamespace(namespace)
		}
		o.SetManagedFields(nil)
		out.add(mapping.Resource, o)
	}
	return out, nil
}

// list lists the objects of a resource in namespace ("" for all).
func (s objects) list(_ context.Context, gvr schema.GroupVersionResource, namespace string) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, o := range s[gvr] {
		if namespace == "" || o.GetNamespace() == namespace {
			out = append(out, o)
		}
	}
	return out, nil
}

func (s objects) add(gvr schema.GroupVersionResource, objs ...*unstructured.Unstructured) {
	s[gvr] = append(s[gvr], objs...)
}

// Owned lists the objects of a resource whose controller is owner. As the
// registry's index, it does not look at their namespace.
func (s objects) Owned(gvr schema.GroupVersionResource, _ string, owner types.UID) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, o := range s[gvr] {
		if ref := metav1.GetControllerOfNoCopy(o); ref != nil && ref.UID == owner {
			out = append(out, o)
		}
	}
	return out, nil
}

// Orphans lists the objects of a resource in namespace ("" for all) that
// no controller owns (all of them: the core checks sel).
func (s objects) Orphans(gvr schema.GroupVersionResource, namespace string, _ labels.Selector) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, o := range s[gvr] {
		if metav1.GetControllerOfNoCopy(o) == nil && (namespace == "" || o.GetNamespace() == namespace) {
			out = append(out, o)
		}
	}
	return out, nil
}

// Object returns an object; namespace is "" for a cluster-scoped one.
func (s objects) Object(gvr schema.GroupVersionResource, namespace, name string) (*unstructured.Unstructured, error) {
	for _, o := range s[gvr] {
		if o.GetNamespace() == namespace && o.GetName() == name {
			return o, nil
		}
	}
	return nil, apierrors.NewNotFound(gvr.GroupResource(), name)
}
