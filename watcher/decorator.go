package watcher

import (
	"context"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	"universalcontroller.dev/uc/internal/registry"
	"universalcontroller.dev/uc/internal/tracing"
	"universalcontroller.dev/uc/schemas/hooks"
)

// A decorator's requests are built like a controller's, with the decorated
// object as the parent: its key names the object's resource, its children
// are its attachments — the objects it controls that carry the decorator's
// annotation — and the request is Metacontroller's decorator request. An
// object is synced while the decorator's selectors match it, and finalized
// once they stop matching or it is deleted, as long as it carries the
// decorator's finalizer.

// followDecorator puts a decorator's event handlers on the informers of its
// decorated resources and of its attachments.
func (w *Watcher) followDecorator(ctl *registry.Controller, add func(registry.Resource, cache.ResourceEventHandler)) {
	for i := range ctl.Decorator.Resources {
		d := &ctl.Decorator.Resources[i]
		changed := changedRV
		if d.IgnoreStatusChanges {
			changed = changedMoreThanStatus
		}
		add(d.Resource, changeHandler(func(obj any) { w.enqueueDecorated(ctl, d, obj) }, changed))
	}
	for _, child := range ctl.Children {
		add(child.Resource, changeHandler(func(obj any) { w.enqueueDecoratedOwner(ctl, obj) }, changedRV))
	}
}

// enqueueDecorated syncs an object of a decorated resource that the
// decorator decorates or has to let go.
func (w *Watcher) enqueueDecorated(ctl *registry.Controller, d *registry.Decorated, obj any) {
	if u, ok := obj.(*unstructured.Unstructured); ok && ctl.Decorates(d, u) {
		w.enqueueChanged(parentKey{ctl.Name, d.Key(), u.GetNamespace(), u.GetName()}, 0)
	}
}

// enqueueDecoratedOwner maps a change of one of the decorator's attachments
// to the object it is attached to.
func (w *Watcher) enqueueDecoratedOwner(ctl *registry.Controller, obj any) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok || !ctl.IsAttachment(u) {
		return
	}
	ref := metav1.GetControllerOfNoCopy(u)
	if ref == nil {
		return
	}
	for _, d := range ctl.Decorator.Resources {
		if ref.APIVersion != d.APIVersion() || ref.Kind != d.GVK.Kind {
			continue
		}
		ns := ""
		if d.Namespaced {
			ns = u.GetNamespace()
		}
		w.enqueueChanged(parentKey{ctl.Name, d.Key(), ns, ref.Name}, childDelay)
	}
}

// syncDecorated publishes the sync or finalize request of one decorated
// object, forced for a resync.
func (w *Watcher) syncDecorated(ctx context.Context, ctl *registry.Controller, key parentKey, resync bool) error {
	d, ok := ctl.Decorator.Decorated(key.Resource)
	if !ok {
		return nil
	}
	obj, err := w.reg.Object(d.GVR, key.Namespace, key.Name)
	if apierrors.IsNotFound(err) {
		w.forget(key)
		return nil
	}
	if err != nil {
		return err
	}
	if !ctl.Decorates(d, obj) {
		w.forget(key)
		return nil
	}
	hook, ok := HookForDecorated(ctl, d, obj)
	if !ok {
		w.forget(key)
		return nil
	}
	view := ctl.Decorating(d)
	version := ctl.HookVersion(hook)
	related, ok, err := w.related(ctx, view, obj, version, resync)
	if err != nil || !ok {
		return err // without a customize reply yet, the sync follows it
	}
	_, span := w.tracer.Start(ctx, "claim")
	attached, err := Attachments(w.reg, view, obj)
	tracing.End(span, err)
	if err != nil {
		return err
	}
	req := NewDecoratorRequest(view, obj, attached, related, version, hook == hooks.Finalize)
	meta := w.meta(view, obj, hook)
	observeAll(&meta, req.Attachments, req.Related)
	if _, err := w.publishRequest(ctx, key, resync, &meta, obj, req, observedObjects(ctl, req.Finalizing, obj, req.Attachments, req.Related)); err != nil {
		return err
	}
	w.resyncLater(ctl, key)
	return nil
}

// HookForDecorated tells which hook a decorated object's request is for:
// sync, or finalize for one being deleted, or that the decorator's
// selectors no longer select, that the decorator's finalizer holds, if it
// has a finalize hook (else a sync reply lets it go). One that the
// finalizer does not hold needs no request (ok false).
func HookForDecorated(ctl *registry.Controller, d *registry.Decorated, obj *unstructured.Unstructured) (hook string, ok bool) {
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
func NewDecoratorRequest(ctl *registry.Controller, obj *unstructured.Unstructured, attached [][]*unstructured.Unstructured, related hooks.GroupedObjects, version string, finalizing bool) *hooks.DecoratorRequest {
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
func Attachments(children Children, ctl *registry.Controller, obj *unstructured.Unstructured) ([][]*unstructured.Unstructured, error) {
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
