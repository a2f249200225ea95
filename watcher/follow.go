package watcher

import (
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	"universalcontroller.dev/uc/core"
	"universalcontroller.dev/uc/internal/compact"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// The watcher follows each registered controller through the shared
// informers: a handler per resource its parents' requests depend on
// (its kind's follow), each queueing the parent a change concerns.

// handler is one of a controller's event handlers on a shared informer.
type handler struct {
	informer cache.SharedIndexInformer
	reg      cache.ResourceEventHandlerRegistration
	related  bool // follows a related resource
}

// onController follows a controller's registration: it swaps the event
// handlers on the shared informers of its parent and child resources. The
// customize replies of an earlier registration go with their handlers on
// the related resources (the registry lets those resources go too): the
// parents' next syncs ask the customize hook again.
func (w *Watcher) onController(old, cur *core.Controller) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if old != nil {
		for _, h := range w.handlers[old.Name] {
			_ = h.informer.RemoveEventHandler(h.reg)
		}
		delete(w.handlers, old.Name)
		w.customize.forget(old.Name)
	}
	if cur == nil {
		return
	}
	add := func(res core.Resource, h cache.ResourceEventHandler) {
		inf := w.reg.Informer(res.GVR)
		reg, err := inf.AddEventHandler(noting{next: h, gvr: res.GVR, handled: &w.handled})
		if err != nil {
			w.log.Error("watch", "controller", cur.Name, "resource", res.GVR.String(), "err", err)
			return
		}
		w.handlers[cur.Name] = append(w.handlers[cur.Name], handler{informer: inf, reg: reg})
	}
	w.kindOf(cur).follow(cur, add)
}

// followParents adds the handlers that queue a UniversalController's
// parents: when they change, and when their children or revisions do.
func (w *Watcher) followParents(cur *core.Controller, add func(core.Resource, cache.ResourceEventHandler)) {
	name := cur.Name
	changed := changedNotByUC
	if cur.Spec.ParentResource.IgnoreStatusChanges != nil && *cur.Spec.ParentResource.IgnoreStatusChanges {
		changed = func(o, n *unstructured.Unstructured) bool { return changedMoreThanStatus(o, n) }
	}
	add(cur.Parent, w.parentHandler(name, changed))
	for _, child := range cur.Children {
		add(child.Resource, changeHandler(func(obj any) { w.enqueueOwner(name, obj) }, changedRV))
	}
	if cur.Rolling() {
		// A rollout's progress is in the parent's revisions: the requests
		// follow it.
		add(core.Resource{GVR: v1alpha1.RevisionResource}, changeHandler(func(obj any) { w.enqueueOwner(name, obj) }, changedRV))
	}
}

// changeHandler calls fn for every add, every delete, and every update that
// changed says is one. It reads the objects' metadata only: a child's or a
// related object's change costs no decoding of the cached object.
func changeHandler(fn func(obj any), changed func(o, n metav1.Object) bool) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: fn,
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := compact.Meta(oldObj)
			n, ok2 := compact.Meta(newObj)
			if ok1 && ok2 && changed(o, n) {
				fn(newObj)
			}
		},
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			fn(obj)
		},
	}
}

// changedRV is true for a real update (not an informer resync).
func changedRV(o, n metav1.Object) bool {
	return o.GetResourceVersion() != n.GetResourceVersion()
}

// changedMoreThanStatus is true unless only the status (or nothing) changed.
func changedMoreThanStatus(o, n metav1.Object) bool {
	return o.GetGeneration() != n.GetGeneration() ||
		!equality.Semantic.DeepEqual(o.GetLabels(), n.GetLabels()) ||
		!equality.Semantic.DeepEqual(o.GetAnnotations(), n.GetAnnotations()) ||
		!equality.Semantic.DeepEqual(o.GetFinalizers(), n.GetFinalizers()) ||
		!equality.Semantic.DeepEqual(o.GetDeletionTimestamp(), n.GetDeletionTimestamp())
}

// enqueueParent syncs a parent that changed: its backoff starts again.
func (w *Watcher) enqueueParent(controller string, obj any) {
	if m, ok := compact.Meta(obj); ok {
		w.enqueueChanged(parentKey{controller, "", m.GetNamespace(), m.GetName()}, 0)
	}
}

// enqueueChanged syncs a parent after a delay: it, its children or its
// related objects changed, by anyone but uc, so its backoff starts again.
func (w *Watcher) enqueueChanged(key parentKey, after time.Duration) {
	w.republish.changed(key, time.Now())
	w.queue.AddAfter(key, after)
}

// enqueueOwner maps a child change to its parent: the controller owner when
// it is of the parent's kind, else every parent whose selector would adopt it.
func (w *Watcher) enqueueOwner(controller string, obj any) {
	u, ok := compact.Meta(obj)
	if !ok {
		return
	}
	ctl, ok := w.reg.Get(controller)
	if !ok {
		return
	}
	ns := ""
	if ctl.Parent.Namespaced {
		ns = u.GetNamespace()
	}
	if ref := metav1.GetControllerOfNoCopy(u); ref != nil {
		if ref.APIVersion == ctl.Parent.APIVersion() && ref.Kind == ctl.Parent.GVK.Kind {
			w.enqueueChanged(parentKey{controller, "", ns, ref.Name}, childDelay)
		}
		return
	}
	// An orphan is rare: decoding every parent of its namespace to read
	// their selectors costs no more than it did once in every sync.
	parents, err := w.reg.List(ctl.Parent.GVR, ns, labels.Everything())
	if err != nil {
		return
	}
	for _, parent := range parents {
		if sel, err := ctl.Selector(parent); err == nil && sel.Matches(labels.Set(u.GetLabels())) {
			w.enqueueChanged(parentKey{controller, "", ns, parent.GetName()}, childDelay)
		}
	}
}

// childDelay delays a parent's sync after a change of one of its children, so
// that the changes of one apply (every child it wrote) give one sync, not
// one per child.
const childDelay = 50 * time.Millisecond
