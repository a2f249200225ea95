package watcher

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/resourceversion"

	"universalcontroller.dev/uc/internal/registry"
	"universalcontroller.dev/uc/schemas/bus"
)

// Holding a parent's syncs around an apply. An applier announces when it
// starts applying a parent's replies and when it is done, with what it
// wrote (bus.Applying). Meanwhile the watcher holds the parent's syncs
// back; once the apply ended, it holds them until its caches have seen
// every write of the apply, then syncs the parent once if a sync was held
// back. So the hook sees the writes of one apply in one request, not in one
// request per watch event as they come — the extra hook calls a sync made
// on the first events of an apply cost.
//
// Both waits are bounded: an applier that dies never says it is done, and
// a written object may be changed again, or deleted, before the cache sees
// the write.

// maxApplyHold bounds how long a parent's syncs wait for an apply that
// never says it ended (its applier died).
const maxApplyHold = 10 * time.Second

// maxWriteLag bounds how long a parent's syncs wait, once its apply ended,
// for the watcher's caches to see the apply's writes.
const maxWriteLag = 5 * time.Second

// hold is a parent's syncs held back during an apply.
type hold struct {
	until  time.Time // the longest it holds
	synced bool      // a sync was held back
	resync bool      // a resync was held back
	// ended is set once the apply ended: the hold then waits for the
	// caches to see wrote.
	ended bool
	wrote []bus.Written
}

// onApplying holds a parent's syncs back while an applier applies to it,
// and syncs it once the apply ended and the caches saw its writes, if a
// sync was held back.
func (w *Watcher) onApplying(msg *nats.Msg) {
	var n bus.Applying
	if err := json.Unmarshal(msg.Data, &n); err != nil {
		w.log.Error("bad apply notice", "subject", msg.Subject, "err", err)
		return
	}
	controller, ok := bus.ControllerOf(msg.Subject)
	if !ok {
		return
	}
	key := parentKey{controller, n.Resource, n.Namespace, n.Name, false}
	w.applyingMu.Lock()
	defer w.applyingMu.Unlock()
	if !n.Done {
		w.applying[key] = &hold{until: time.Now().Add(maxApplyHold)}
		return
	}
	h := w.applying[key]
	if h == nil {
		if len(n.Wrote) == 0 {
			return
		}
		// The start was not heard (this watcher started meanwhile): the
		// writes are waited for all the same.
		h = &hold{}
		w.applying[key] = h
	}
	h.ended, h.wrote, h.until = true, n.Wrote, time.Now().Add(maxWriteLag)
	w.release(key, h)
}

// heldBack tells a parent being applied, or whose apply's writes the
// caches have not all seen yet; its sync comes once they have.
func (w *Watcher) heldBack(key parentKey) bool {
	resync := key.Resync
	key.Resync = false
	w.applyingMu.Lock()
	defer w.applyingMu.Unlock()
	h := w.applying[key]
	switch {
	case h == nil:
		return false
	case time.Now().After(h.until):
		delete(w.applying, key) // the end, or the writes, never came
		return false
	}
	h.synced, h.resync = true, h.resync || resync
	if w.release(key, h) {
		return true // released: the sync is queued again
	}
	w.queue.AddAfter(key, time.Until(h.until))
	return true
}

// release ends a hold whose apply ended once the caches saw its writes,
// and queues the parent's sync if one was held back. It tells whether it
// ended the hold. Called with applyingMu held.
func (w *Watcher) release(key parentKey, h *hold) bool {
	if !h.ended || !w.seen(key.Controller, h.wrote) {
		return false
	}
	delete(w.applying, key)
	if h.synced {
		key.Resync = h.resync
		w.queue.AddAfter(key, childDelay)
	}
	return true
}

// seen tells whether the watcher's caches have seen every write of an
// apply of the controller's.
func (w *Watcher) seen(controller string, wrote []bus.Written) bool {
	ctl, ok := w.reg.Get(controller)
	return !ok || writesSeen(w.reg, wrote, func(gvr schema.GroupVersionResource) bool { return watches(ctl, gvr) })
}

// objectCache is what writesSeen reads: the registry's informers.
type objectCache interface {
	Object(gvr schema.GroupVersionResource, namespace, name string) (*unstructured.Unstructured, error)
	// LastSyncResourceVersion is the resourceVersion the resource's
	// informer last heard.
	LastSyncResourceVersion(gvr schema.GroupVersionResource) string
}

// writesSeen tells whether a cache has seen every write: a written object
// at its resourceVersion or a later one (or gone, once its informer is past
// that version), a deleted one gone (or replaced by another object of its
// name). Writes to a resource that is not watched are not waited for.
func writesSeen(c objectCache, wrote []bus.Written, watched func(schema.GroupVersionResource) bool) bool {
	return !slices.ContainsFunc(wrote, func(wr bus.Written) bool {
		gvr := schema.GroupVersionResource{Group: wr.Group, Version: wr.Version, Resource: wr.Resource}
		if !watched(gvr) {
			return false
		}
		obj, err := c.Object(gvr, wr.Namespace, wr.Name)
		switch {
		case wr.Deleted != "":
			return err == nil && string(obj.GetUID()) == wr.Deleted
		case err != nil:
			// Gone: deleted since, once the cache is past the write.
			return !atLeast(c.LastSyncResourceVersion(gvr), wr.ResourceVersion)
		}
		return !atLeast(obj.GetResourceVersion(), wr.ResourceVersion)
	})
}

// watches tells a resource whose objects the watcher caches for the
// controller: its parents' and its children's.
func watches(ctl *registry.Controller, gvr schema.GroupVersionResource) bool {
	if ctl.Decorator != nil {
		return slices.ContainsFunc(ctl.Decorator.Resources, func(d registry.Decorated) bool { return d.GVR == gvr }) ||
			slices.ContainsFunc(ctl.Children, func(c registry.Child) bool { return c.GVR == gvr })
	}
	return ctl.Parent.GVR == gvr || slices.ContainsFunc(ctl.Children, func(c registry.Child) bool { return c.GVR == gvr })
}

// atLeast tells whether resourceVersion rv is want or a later one. Kubernetes
// resourceVersions compare (k8s.io/apimachinery's CompareResourceVersion);
// one that does not parse is only equal to itself.
func atLeast(rv, want string) bool {
	c, err := resourceversion.CompareResourceVersion(rv, want)
	if err != nil {
		return rv == want
	}
	return c >= 0
}
