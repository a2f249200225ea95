package watcher

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/client-go/tools/cache"

	"universalcontroller.dev/uc/core"
	"universalcontroller.dev/uc/internal/compact"
	"universalcontroller.dev/uc/schemas/bus"
)

// A parent's syncs await the writes of an apply. An applier announces when
// it starts applying a parent's replies and when it is done, with what it
// wrote (bus.Applying). Meanwhile the watcher defers the parent's syncs;
// once the apply ended, it defers them until its caches have seen every
// write of the apply, then syncs the parent once if a sync was deferred.
// So the hook sees the writes of one apply in one request, not in one
// request per watch event as they come — the extra hook calls a sync made
// on the first events of an apply cost.
//
// Both waits are bounded: an applier that dies never says it is done, and
// a written object may be changed again, or deleted, before the cache sees
// the write.

// maxApplyWait bounds how long a parent's syncs wait for an apply that
// never says it ended (its applier died).
const maxApplyWait = 10 * time.Second

// maxWriteLag bounds how long a parent's syncs wait, once its apply ended,
// for the watcher's caches to see the apply's writes: a written object may
// be changed again, or deleted, or leave the watcher's selection before
// they do. While a cache is not yet at the time of a write (the latest
// version its handlers were given is older), the write is still to come,
// and the wait goes on, up to maxWriteLagBehind: under load the changes
// come late.
const (
	maxWriteLag       = 5 * time.Second
	maxWriteLagBehind = 30 * time.Second
)

// onApplying defers a parent's syncs while an applier applies to it, and
// syncs it once the apply ended and the caches saw its writes, if a sync
// was deferred.
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
	key := parentKey{controller, n.Resource, n.Namespace, n.Name}
	if !n.Done {
		w.applying.start(key, time.Now())
		return
	}
	w.applying.end(key, n.Wrote, time.Now(), w.seen)
}

// awaitsWrites tells a parent being applied, or whose apply's writes the
// caches have not all seen yet; its sync comes once they have, or at the
// latest when the wait ends (a resync if resync).
func (w *Watcher) awaitsWrites(key parentKey, resync bool) bool {
	return w.applying.awaiting(key, resync, time.Now(), w.seen)
}

// writeWaits are the parents whose syncs await the writes of an apply.
type writeWaits struct {
	// sync queues a parent's sync (a resync if resync) after a delay:
	// the sync a wait deferred, once the wait ends.
	sync func(key parentKey, resync bool, after time.Duration)
	// behind tells whether an informer has not yet heard of the time of
	// one of an apply's writes of the controller's; unseen describes the
	// first write the caches have not seen, for the log.
	behind func(controller string, wrote []bus.Written) bool
	unseen func(controller string, wrote []bus.Written) []any
	log    *slog.Logger

	mu    sync.Mutex
	byKey map[parentKey]*writeWait
}

// writeWait is a parent's syncs awaiting the writes of an apply.
type writeWait struct {
	until    time.Time   // the longest it waits
	deadline *time.Timer // ends it at until
	synced   bool        // a sync was deferred
	resync   bool        // a resync was deferred
	// ended is set once the apply ended, at endedAt: the wait is then for
	// the caches to see wrote.
	ended   bool
	endedAt time.Time
	wrote   []bus.Written
}

// start defers the parent's syncs: an apply to it started. A sync that
// the parent's previous apply deferred stays deferred.
func (ws *writeWaits) start(key parentKey, now time.Time) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.byKey == nil {
		ws.byKey = map[parentKey]*writeWait{}
	}
	h := &writeWait{}
	if prev := ws.byKey[key]; prev != nil {
		prev.deadline.Stop()
		h.synced, h.resync = prev.synced, prev.resync
	}
	ws.byKey[key] = h
	ws.extend(key, h, now, maxApplyWait)
}

// end records that the apply ended having written wrote: the wait is now
// for seen(controller, wrote), and ends at once when that is already so.
func (ws *writeWaits) end(key parentKey, wrote []bus.Written, now time.Time, seen func(string, []bus.Written) bool) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	h := ws.byKey[key]
	if h == nil {
		if len(wrote) == 0 {
			return
		}
		// The start was not heard (this watcher started meanwhile): the
		// writes are waited for all the same.
		if ws.byKey == nil {
			ws.byKey = map[parentKey]*writeWait{}
		}
		h = &writeWait{}
		ws.byKey[key] = h
	}
	h.ended, h.endedAt, h.wrote = true, now, wrote
	ws.extend(key, h, now, maxWriteLag)
	ws.release(key, h, seen)
}

// awaiting tells whether the parent's syncs await an apply's writes, and
// if so records that a sync (a resync if resync) waits for the end of the
// wait. It ends a wait whose apply's writes the caches have seen since.
func (ws *writeWaits) awaiting(key parentKey, resync bool, now time.Time, seen func(string, []bus.Written) bool) bool {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	h := ws.byKey[key]
	switch {
	case h == nil:
		return false
	case now.After(h.until):
		ws.drop(key, h) // its deadline is firing: the sync goes ahead
		return false
	}
	h.synced, h.resync = true, h.resync || resync
	ws.release(key, h, seen)
	return true
}

// check ends the wait of an apply that ended if the caches have seen its
// writes since, and queues the sync it deferred: for a change that syncs
// nothing, and so does not go through awaiting — uc's own status on the
// parent, often an apply's last write.
func (ws *writeWaits) check(key parentKey, seen func(string, []bus.Written) bool) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if h := ws.byKey[key]; h != nil {
		ws.release(key, h, seen)
	}
}

// extend makes the wait end that long from now.
func (ws *writeWaits) extend(key parentKey, h *writeWait, now time.Time, d time.Duration) {
	if h.deadline != nil {
		h.deadline.Stop()
	}
	h.until = now.Add(d)
	h.deadline = time.AfterFunc(d, func() { ws.expire(key, h, time.Now()) })
}

// expire ends the wait at its deadline, if it is still the parent's: the
// apply never said it ended, or the writes never showed — unless an
// informer is behind one of them, when it waits on (see maxWriteLagBehind).
// A sync it deferred then goes ahead without them, and its hook call is
// likely one more: that is logged.
func (ws *writeWaits) expire(key parentKey, h *writeWait, now time.Time) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.byKey[key] != h {
		return
	}
	if h.ended && now.Before(h.endedAt.Add(maxWriteLagBehind)) && ws.behind(key.Controller, h.wrote) {
		ws.extend(key, h, now, min(maxWriteLag, h.endedAt.Add(maxWriteLagBehind).Sub(now)))
		return
	}
	ws.drop(key, h)
	if h.synced && h.ended {
		args := []any{"controller", key.Controller, "parent", key.String(), "writes", len(h.wrote), "waited", now.Sub(h.endedAt).Round(time.Millisecond)}
		if unseen := ws.unseen(key.Controller, h.wrote); unseen != nil {
			ws.log.Info("the caches did not show an apply's writes in time: the parent is synced without them", append(args, unseen...)...)
		} else {
			// The last write seen was one that syncs nothing (uc's own
			// status), so nothing ended the wait before its deadline.
			ws.log.Debug("an apply's writes were seen, the parent is synced at the wait's deadline", args...)
		}
	} else if h.synced {
		ws.log.Warn("an apply did not say it ended in time (its applier stopped?): the parent is synced", "controller", key.Controller,
			"parent", key.String(), "waited", maxApplyWait)
	}
	ws.queueDeferred(key, h, 0)
}

// release ends the wait of an apply that ended once seen says the caches
// saw its writes, and queues the sync it deferred. Called with mu held.
func (ws *writeWaits) release(key parentKey, h *writeWait, seen func(string, []bus.Written) bool) {
	if h.ended && seen(key.Controller, h.wrote) {
		ws.drop(key, h)
		ws.queueDeferred(key, h, childDelay)
	}
}

// drop ends a wait. Called with mu held.
func (ws *writeWaits) drop(key parentKey, h *writeWait) {
	h.deadline.Stop()
	delete(ws.byKey, key)
}

// queueDeferred queues the sync a wait deferred, if any. Called with mu
// held.
func (ws *writeWaits) queueDeferred(key parentKey, h *writeWait, after time.Duration) {
	if h.synced {
		ws.sync(key, h.resync, after)
	}
}

// seen tells whether the watcher's caches have seen every write of an
// apply of the controller's.
func (w *Watcher) seen(controller string, wrote []bus.Written) bool {
	ctl, ok := w.reg.Get(controller)
	return !ok || writesSeen(w.cache(), wrote, func(gvr schema.GroupVersionResource) bool { return watches(ctl, gvr) })
}

// behind tells whether an informer of the watcher's has not yet heard of
// the time of one of an apply's writes of the controller's.
func (w *Watcher) behind(controller string, wrote []bus.Written) bool {
	ctl, ok := w.reg.Get(controller)
	return ok && writesBehind(w.cache(), wrote, func(gvr schema.GroupVersionResource) bool { return watches(ctl, gvr) })
}

// objectCache is what writesSeen reads: the registry's informers, and
// how far the watcher's handlers got in each (see handledVersions).
type objectCache interface {
	// Meta is an object's metadata, or a NotFound error.
	Meta(gvr schema.GroupVersionResource, namespace, name string) (metav1.Object, error)
	// HandledVersion is the latest resourceVersion of the resource the
	// watcher's handlers were given: its informer's cache holds every
	// change up to it.
	HandledVersion(gvr schema.GroupVersionResource) string
}

// cache is the watcher's objectCache.
func (w *Watcher) cache() objectCache { return watcherCache{w.reg, &w.handled} }

type watcherCache struct {
	Registry
	*handledVersions
}

// handledVersions are, per resource, the latest resourceVersion the
// watcher's event handlers were given. An informer updates its cache
// before it hands a change to the handlers, so its cache holds every
// change up to that version; the informer's last resourceVersion
// (LastSyncResourceVersion) runs ahead of its cache while changes wait in
// its queue — as they do when the process is short of CPU.
type handledVersions struct {
	mu    sync.Mutex
	byGVR map[schema.GroupVersionResource]int64
}

// note records the resourceVersion of an object handed to a handler of
// gvr's informer.
func (h *handledVersions) note(gvr schema.GroupVersionResource, obj any) {
	m, ok := compact.Meta(obj)
	if !ok {
		return
	}
	rv := parseVersion(m.GetResourceVersion())
	h.mu.Lock()
	defer h.mu.Unlock()
	if rv > h.byGVR[gvr] {
		if h.byGVR == nil {
			h.byGVR = map[schema.GroupVersionResource]int64{}
		}
		h.byGVR[gvr] = rv
	}
}

// HandledVersion is the latest resourceVersion handed to a handler of
// gvr's informer; "" before the first (or if it does not parse as etcd's).
func (h *handledVersions) HandledVersion(gvr schema.GroupVersionResource) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if rv := h.byGVR[gvr]; rv > 0 {
		return strconv.FormatInt(rv, 10)
	}
	return ""
}

// noting is an event handler that notes in handled the resourceVersion of
// every object it is given before handing it to next.
type noting struct {
	next    cache.ResourceEventHandler
	gvr     schema.GroupVersionResource
	handled *handledVersions
}

func (n noting) OnAdd(obj any, initial bool) {
	n.handled.note(n.gvr, obj)
	n.next.OnAdd(obj, initial)
}

func (n noting) OnUpdate(oldObj, newObj any) {
	n.handled.note(n.gvr, newObj)
	n.next.OnUpdate(oldObj, newObj)
}

func (n noting) OnDelete(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		n.handled.note(n.gvr, t.Obj)
	} else {
		n.handled.note(n.gvr, obj)
	}
	n.next.OnDelete(obj)
}

// writesSeen tells whether a cache has seen every write: a written object
// at its resourceVersion or a later one (or gone, once its informer is past
// that version), a deleted one gone, being deleted, or replaced by another
// object of its name. Writes to a resource that is not watched are not waited for.
func writesSeen(c objectCache, wrote []bus.Written, watched func(schema.GroupVersionResource) bool) bool {
	_, unseen := firstUnseen(c, wrote, watched)
	return !unseen
}

// firstUnseen is the first write the cache has not seen (see writesSeen).
func firstUnseen(c objectCache, wrote []bus.Written, watched func(schema.GroupVersionResource) bool) (bus.Written, bool) {
	i := slices.IndexFunc(wrote, func(wr bus.Written) bool {
		gvr := schema.GroupVersionResource{Group: wr.Group, Version: wr.Version, Resource: wr.Resource}
		if !watched(gvr) {
			return false
		}
		obj, err := c.Meta(gvr, wr.Namespace, wr.Name)
		switch {
		case wr.Deleted != "":
			// Still there, and not yet seen being deleted (an object with
			// finalizers stays until they are done).
			return err == nil && string(obj.GetUID()) == wr.Deleted && obj.GetDeletionTimestamp() == nil
		case err != nil:
			// Gone: deleted since, once the cache is past the write.
			return !atLeast(c.HandledVersion(gvr), wr.ResourceVersion)
		}
		return !atLeast(obj.GetResourceVersion(), wr.ResourceVersion)
	})
	if i < 0 {
		return bus.Written{}, false
	}
	return wrote[i], true
}

// unseen describes, for a log line, the first write of an apply of the
// controller's that the caches have not seen: the write, the version the
// cache holds, and the latest its handlers were given; nil when they saw
// every one.
func (w *Watcher) unseen(controller string, wrote []bus.Written) []any {
	ctl, ok := w.reg.Get(controller)
	if !ok {
		return nil
	}
	c := w.cache()
	wr, ok := firstUnseen(c, wrote, func(gvr schema.GroupVersionResource) bool { return watches(ctl, gvr) })
	if !ok {
		return nil
	}
	gvr := schema.GroupVersionResource{Group: wr.Group, Version: wr.Version, Resource: wr.Resource}
	cached := "none"
	if obj, err := c.Meta(gvr, wr.Namespace, wr.Name); err == nil {
		cached = obj.GetResourceVersion()
	}
	return []any{"unseen", fmt.Sprintf("%s %s/%s at %s%s", wr.Resource, wr.Namespace, wr.Name, wr.ResourceVersion, wr.Deleted),
		"cached", cached, "handled", c.HandledVersion(gvr)}
}

// writesBehind tells whether the cache of a written resource is not yet at
// the time of its write: the latest version its handlers were given is
// older than the write's. (A delete has no resourceVersion: it is never
// behind.)
func writesBehind(c objectCache, wrote []bus.Written, watched func(schema.GroupVersionResource) bool) bool {
	return slices.ContainsFunc(wrote, func(wr bus.Written) bool {
		gvr := schema.GroupVersionResource{Group: wr.Group, Version: wr.Version, Resource: wr.Resource}
		return wr.ResourceVersion != "" && watched(gvr) && !atLeast(c.HandledVersion(gvr), wr.ResourceVersion)
	})
}

// watches tells a resource whose objects the watcher caches for the
// controller: its parents' and its children's.
func watches(ctl *core.Controller, gvr schema.GroupVersionResource) bool {
	return slices.Contains(ctl.ParentResources(), gvr) || slices.ContainsFunc(ctl.Children, func(c core.Child) bool { return c.GVR == gvr })
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
