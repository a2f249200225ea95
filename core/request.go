package core

import (
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// The requests the watcher publishes: which hook a parent (or decorated
// object) is asked, the children it claims, and the request that carries
// them.

// HookFor tells which hook a parent's request is for: sync, or finalize
// for a parent being deleted that uc's finalizer holds, if the controller
// has a finalize hook (else a sync reply lets it go). A parent being
// deleted that uc's finalizer does not hold needs no request (ok false).
func HookFor(ctl *Controller, parent *unstructured.Unstructured) (hook string, ok bool) {
	switch {
	case parent.GetDeletionTimestamp() == nil:
		return hooks.Sync, true
	case !slices.Contains(parent.GetFinalizers(), ctl.Finalizer()):
		return "", false // nothing of uc's holds the parent
	case ctl.Spec.Hooks.Finalize != nil:
		return hooks.Finalize, true
	}
	return hooks.Sync, true
}

// InvalidSelector is the failure reported on a parent whose children
// cannot be selected (see Controller.Selector): no hook is asked.
func InvalidSelector(err error) bus.Failure {
	return bus.Failure{Reason: v1alpha1.ReasonInvalidSelector, Message: err.Error()}
}

// Cache holds the live objects of the resources a controller watches: the
// registry's shared informers, or any other set of objects.
type Cache interface {
	// Owned lists the objects of a resource in namespace ("" for all) whose
	// controller is owner.
	Owned(gvr schema.GroupVersionResource, namespace string, owner types.UID) ([]*unstructured.Unstructured, error)
	// Orphans lists the objects of a resource in namespace ("" for all)
	// that no controller owns; it may leave out those sel does not select.
	Orphans(gvr schema.GroupVersionResource, namespace string, sel labels.Selector) ([]*unstructured.Unstructured, error)
	// Object returns an object; namespace is "" for a cluster-scoped one.
	Object(gvr schema.GroupVersionResource, namespace, name string) (*unstructured.Unstructured, error)
}

// Claim returns, per declared child resource, the parent's children: the
// objects it controls and the orphans it may adopt that Claims.
// (Controlled children that stop matching are released by the applier.)
func Claim(children Cache, ctl *Controller, parent *unstructured.Unstructured, sel labels.Selector) ([][]*unstructured.Unstructured, error) {
	claimed := make([][]*unstructured.Unstructured, len(ctl.Children))
	for i, child := range ctl.Children {
		owned, err := children.Owned(child.GVR, parent.GetNamespace(), parent.GetUID())
		if err != nil {
			return nil, err
		}
		orphans, err := children.Orphans(child.GVR, parent.GetNamespace(), sel)
		if err != nil {
			return nil, err
		}
		for _, o := range slices.Concat(owned, orphans) {
			if Claims(parent.GetUID(), sel, o) {
				claimed[i] = append(claimed[i], o)
			}
		}
	}
	return claimed, nil
}

// NewSyncRequest builds a sync or finalize request: every declared child
// kind has an entry, its objects (claimed, by declared child kind) keyed
// as the hook version asks.
func NewSyncRequest(ctl *Controller, parent *unstructured.Unstructured, claimed [][]*unstructured.Unstructured, related hooks.GroupedObjects, version string, finalizing bool) *hooks.SyncRequest {
	return &hooks.SyncRequest{
		Controller: ctl.Object,
		Parent:     parent,
		Children:   group(ctl, claimed, version),
		Related:    related,
		Finalizing: finalizing,
	}
}

// group groups a parent's children (claimed, by declared child kind) as a
// request carries them: every declared kind has an entry, its objects
// keyed as the hook version asks.
func group(ctl *Controller, claimed [][]*unstructured.Unstructured, version string) hooks.GroupedObjects {
	children := hooks.GroupedObjects{}
	for i, child := range ctl.Children {
		children[hooks.GroupKey(child.GVK.Kind, child.APIVersion())] = hooks.ObjectMap{}
		for _, o := range claimed[i] {
			children.Insert(hooks.ObjectKey(version, ctl.Parent.Namespaced, o), o)
		}
	}
	return children
}

// HookForDecorated tells which hook a decorated object's request is for:
// sync, or finalize for one being deleted, or that the decorator's
// selectors no longer select, that the decorator's finalizer holds, if it
// has a finalize hook (else a sync reply lets it go). One that the
// finalizer does not hold needs no request (ok false).
func HookForDecorated(ctl *Controller, d *Decorated, obj *unstructured.Unstructured) (hook string, ok bool) {
	switch {
	case obj.GetDeletionTimestamp() == nil && d.Selects(obj):
		return hooks.Sync, true
	case !slices.Contains(obj.GetFinalizers(), ctl.Finalizer()):
		return "", false // nothing of the decorator's holds it
	case ctl.Spec.Hooks.Finalize != nil:
		return hooks.Finalize, true
	}
	return hooks.Sync, true
}

// NewDecoratorRequest builds a decorator's sync or finalize request: every
// declared attachment kind has an entry, its objects keyed as the hook
// version asks. ctl is the decorator's view for the object's resource.
func NewDecoratorRequest(ctl *Controller, obj *unstructured.Unstructured, attached [][]*unstructured.Unstructured, related hooks.GroupedObjects, version string, finalizing bool) *hooks.DecoratorRequest {
	return &hooks.DecoratorRequest{
		Controller:  ctl.Object,
		Object:      obj,
		Attachments: group(ctl, attached, version),
		Related:     related,
		Finalizing:  finalizing,
	}
}

// Attachments returns, per attachment kind, the decorator's attachments of
// obj.
func Attachments(children Cache, ctl *Controller, obj *unstructured.Unstructured) ([][]*unstructured.Unstructured, error) {
	out := make([][]*unstructured.Unstructured, len(ctl.Children))
	for i, child := range ctl.Children {
		owned, err := children.Owned(child.GVR, obj.GetNamespace(), obj.GetUID())
		if err != nil {
			return nil, err
		}
		for _, o := range owned {
			if ctl.IsAttachment(o) {
				out[i] = append(out[i], o)
			}
		}
	}
	return out, nil
}
