package watcher

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"universalcontroller.dev/uc/core"
	"universalcontroller.dev/uc/internal/compact"
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
func (w *Watcher) followDecorator(ctl *core.Controller, add func(core.Resource, cache.ResourceEventHandler)) {
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
func (w *Watcher) enqueueDecorated(ctl *core.Controller, d *core.Decorated, obj any) {
	if u, ok := compact.Meta(obj); ok && ctl.Decorates(d, u) {
		w.enqueueChanged(parentKey{ctl.Name, d.Key(), u.GetNamespace(), u.GetName()}, 0)
	}
}

// enqueueDecoratedOwner maps a change of one of the decorator's attachments
// to the object it is attached to.
func (w *Watcher) enqueueDecoratedOwner(ctl *core.Controller, obj any) {
	u, ok := compact.Meta(obj)
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
func (w *Watcher) syncDecorated(ctx context.Context, ctl *core.Controller, key parentKey, resync bool) error {
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
	hook, ok := core.HookForDecorated(ctl, d, obj)
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
	attached, err := core.Attachments(w.reg.ForRequests(), view, obj)
	tracing.End(span, err)
	if err != nil {
		return err
	}
	req := core.NewDecoratorRequest(view, obj, attached, related, version, hook == hooks.Finalize)
	meta := w.meta(view, obj, hook)
	observeAll(&meta, req.Attachments, req.Related)
	if _, err := w.publishRequest(ctx, key, resync, &meta, obj, req, observedObjects(ctl, req.Finalizing, obj, req.Attachments, req.Related)); err != nil {
		return err
	}
	w.resyncLater(ctl, key)
	return nil
}
