package registry

import (
	"cmp"
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"universalcontroller.dev/uc/core"
	"universalcontroller.dev/uc/internal/compact"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// A UniversalController's status.parentsFailing and status.lastFailure are
// counted from the parents themselves: a parent is failing while the Synced
// condition uc writes on it is False. The process that reports on
// UniversalControllers (WithStatus) reads the conditions from its shared
// informer cache and writes the count, whatever the deployment shape.
//
// Why from the parents, and not from what the appliers remember: the
// Synced condition is the one record of a parent's failure that every
// process shares. Each applier writes it on the parents of the partitions
// it holds; the apiserver keeps it whichever replica wrote it. So the count
// needs no message between the roles and no store of its own; every
// process that counts gets the same answer (two reporters write the same
// value, a restarted one starts right); and it follows what an applier's
// memory cannot: a partition that moves to another replica (the new owner's
// next apply replaces the condition, the old owner's memory is not read), a
// replica that dies (its memory goes with it, the conditions stay), a
// parent that recovers (Synced=True) or is deleted (it leaves the cache).
// Per-replica counts merged by server-side apply (one field manager per
// replica) were the alternative: the entry of a replica that died or lost
// partitions would stay until something that knows which replicas live
// removed it, and a failing parent would be counted by its new owner only
// after that owner's next apply of it — a protocol to build for less.
//
// What a parent cannot carry, it cannot tell: a parent whose status schema
// has no room for the Synced condition, or whose status the apiserver
// refuses (StatusWriteFailed), keeps no record of its failure but the
// Warning Event. Only the applier that failed knows; the registry of its
// process remembers it (ParentFailed, until ParentApplied or the parent's
// deletion). Where one process runs every apply of the installation (uc run
// on its embedded NATS server: WithSoleApplier), that memory is complete
// and those parents are counted too. Elsewhere they are in the parents'
// Events alone: a count from the memory of some appliers would be neither
// complete nor the same in two reporters.
type failures struct {
	queue workqueue.TypedDelayingInterface[string] // controllers to report on
	sole  bool                                     // this process runs every apply (WithSoleApplier)

	mu sync.Mutex
	// seen are the failures the appliers of this process met, by parent
	// UID and controller, until the parent's next apply succeeds or it is
	// deleted.
	seen map[types.UID]map[string]v1alpha1.ParentFailure
	// since is when a failing parent whose Synced condition has no
	// lastTransitionTime (its schema keeps none) was first counted, by
	// controller.
	since map[string]map[types.UID]metav1.Time
}

const (
	// reportDelay gathers the changes of many parents into one write of
	// the UniversalController's status.
	reportDelay = time.Second
	// retryDelay is how soon a report that failed is tried again.
	retryDelay = 10 * time.Second
)

func newFailures() *failures {
	return &failures{
		queue: workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[string]{Name: "parent-failures"}),
		seen:  map[types.UID]map[string]v1alpha1.ParentFailure{},
		since: map[string]map[types.UID]metav1.Time{},
	}
}

// WithSoleApplier tells the registry that its process runs every apply of
// the installation (uc run on its embedded NATS server), so the failures
// its appliers report are all there are: the failing parents that carry
// no Synced condition are counted too.
func WithSoleApplier() Option {
	return func(r *Registry) { r.failures.sole = true }
}

// ParentFailed records that the latest apply to a parent of controller
// failed, for the reason of the Warning Event recorded on the parent.
func (r *Registry) ParentFailed(controller string, parent *unstructured.Unstructured, reason, message string) {
	f := r.failures
	f.mu.Lock()
	defer f.mu.Unlock()
	byController := f.seen[parent.GetUID()]
	if byController == nil {
		byController = map[string]v1alpha1.ParentFailure{}
		f.seen[parent.GetUID()] = byController
	}
	key := cacheKey(parent)
	if old, ok := byController[controller]; ok && old.Parent == key && old.Reason == reason && old.Message == message {
		return // the same failure again: nothing new to report
	}
	byController[controller] = v1alpha1.ParentFailure{Parent: key, Reason: reason, Message: message, Time: metav1.Now().Rfc3339Copy()}
	r.reportSoon(controller)
}

// ParentApplied records that the latest apply to a parent of controller
// succeeded, and tells whether the parent was failing until then, as far
// as this process knows.
func (r *Registry) ParentApplied(controller string, parent *unstructured.Unstructured) (wasFailing bool) {
	f := r.failures
	f.mu.Lock()
	defer f.mu.Unlock()
	byController := f.seen[parent.GetUID()]
	if _, wasFailing = byController[controller]; wasFailing {
		delete(byController, controller)
		if len(byController) == 0 {
			delete(f.seen, parent.GetUID())
		}
		r.reportSoon(controller)
	}
	return wasFailing
}

// reportSoon queues a report on controller's failing parents, when this
// process reports on UniversalControllers.
func (r *Registry) reportSoon(controller string) {
	if r.status != nil {
		r.failures.queue.AddAfter(controller, reportDelay)
	}
}

// forget drops what is known of a controller that is gone.
func (f *failures) forget(controller string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for uid, byController := range f.seen {
		delete(byController, controller)
		if len(byController) == 0 {
			delete(f.seen, uid)
		}
	}
	delete(f.since, controller)
}

// gone drops what is known of a deleted parent, and tells whether it was
// failing as far as this process knew.
func (f *failures) gone(uid types.UID) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, was := f.seen[uid]
	delete(f.seen, uid)
	return was
}

// watchFailures keeps an informer's objects' failures in view: a parent
// whose Synced condition or labels change, that appears failing, or that is
// deleted, has its controllers reported on. It is set on every owned
// informer of the registry (parents', children's and revisions'); an
// object that is no controller's parent costs a look at its conditions.
func (r *Registry) watchFailures(gvr schema.GroupVersionResource, inf cache.SharedIndexInformer) {
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if cachedSyncedFalse(obj) != nil {
				r.parentChanged(gvr)
			}
		},
		UpdateFunc: func(old, cur any) {
			if failureChanged(old, cur) {
				r.parentChanged(gvr)
			}
		},
		DeleteFunc: func(obj any) {
			m, ok := compact.Meta(obj)
			if !ok {
				return
			}
			if was := r.failures.gone(m.GetUID()); was || cachedSyncedFalse(obj) != nil {
				r.parentChanged(gvr)
			}
		},
	})
}

// failureChanged tells an update of a cached object that may change what
// a parent counts for: it starts or stops failing, fails otherwise, or is
// relabelled (its labels decide its controller) while it fails. An update
// of a parent that fails neither before nor after changes no count (what
// this process's appliers saw fail is reported as they see it).
func failureChanged(old, cur any) bool {
	o, c := cachedSyncedFalse(old), cachedSyncedFalse(cur)
	if o == nil && c == nil {
		return false
	}
	if !equality.Semantic.DeepEqual(o, c) {
		return true
	}
	om, ok1 := compact.Meta(old)
	cm, ok2 := compact.Meta(cur)
	return ok1 && ok2 && !equality.Semantic.DeepEqual(om.GetLabels(), cm.GetLabels())
}

// parentChanged queues a report on every controller whose parents are of
// resource gvr.
func (r *Registry) parentChanged(gvr schema.GroupVersionResource) {
	if r.status == nil {
		return
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	for name, ctl := range r.controllers {
		if counted(ctl) && ctl.Parent.GVR == gvr {
			r.failures.queue.AddAfter(name, reportDelay)
		}
	}
}

// counted tells a controller whose failing parents are counted: one
// registered by a UniversalController. A decorated object carries no
// condition of uc's, and Metacontroller's objects have no such status.
func counted(ctl *core.Controller) bool { return ctl.Decorator == nil && !ctl.Metacontroller }

// syncedCondition is the Synced condition on an object's status, or nil.
func syncedCondition(obj *unstructured.Unstructured) map[string]any {
	// No copy: this looks at every update of every cached object.
	raw, _, _ := unstructured.NestedFieldNoCopy(obj.Object, "status", "conditions")
	list, _ := raw.([]any)
	for _, c := range list {
		if m, ok := c.(map[string]any); ok && m["type"] == v1alpha1.ConditionSynced {
			return m
		}
	}
	return nil
}

// cachedSyncedFalse is the Synced condition of an object the caches hand
// out when its status is False (the parent fails), or nil. It looks at
// every update of every cached object: one whose JSON does not say False
// is not decoded.
func cachedSyncedFalse(obj any) map[string]any {
	if !mayFail(obj) {
		return nil
	}
	u, err := compact.Decode(obj)
	if err != nil {
		return nil
	}
	return syncedFalse(u)
}

// mayFail tells whether a cached object's Synced condition may be False:
// its JSON says False somewhere. (Not a compact object: it may.)
func mayFail(obj any) bool {
	o, ok := obj.(*compact.Object)
	return !ok || o.Contains(`"`+string(metav1.ConditionFalse)+`"`)
}

// failing tells whether a Synced condition is False: the parent fails.
func failing(synced map[string]any) bool {
	return synced != nil && synced["status"] == string(metav1.ConditionFalse)
}

// syncedFalse is the object's Synced condition when its status is False:
// the parent is failing.
func syncedFalse(obj *unstructured.Unstructured) map[string]any {
	if c := syncedCondition(obj); failing(c) {
		return c
	}
	return nil
}

// unknownReason is lastFailure's reason for a parent whose Synced
// condition keeps none (its status schema admits only some of a
// condition's fields).
const unknownReason = "Unknown"

// count counts the failing parents of a controller, from parents, the
// controller's parents in the cache: those whose Synced condition is
// False, and — where this process runs every apply — those its appliers
// saw fail that carry no record of it. It returns their number and the
// latest of their failures (nil when none fail).
func (f *failures) count(controller string, parents []*unstructured.Unstructured, now metav1.Time) (int, *v1alpha1.ParentFailure) {
	f.mu.Lock()
	defer f.mu.Unlock()
	since := map[types.UID]metav1.Time{}
	n := 0
	var latest *v1alpha1.ParentFailure
	for _, p := range parents {
		seen, known := f.seen[p.GetUID()][controller]
		known = known && f.sole
		cond := syncedFalse(p)
		if cond == nil && !known {
			continue
		}
		n++
		var this v1alpha1.ParentFailure
		if cond != nil {
			this = f.fromCondition(controller, p, cond, seen, known, now, since)
		} else {
			this = seen
		}
		this.Parent = cacheKey(p)
		if later(&this, latest) {
			latest = &this
		}
	}
	f.since[controller] = since
	return n, latest
}

// fromCondition is the failure a parent's Synced=False condition tells;
// what the condition lacks (its schema may admit only type and status) is
// taken from the failure this process's appliers saw (seen, when known),
// or else: the reason Unknown, the time when it was first counted.
func (f *failures) fromCondition(controller string, p *unstructured.Unstructured, cond map[string]any, seen v1alpha1.ParentFailure, known bool, now metav1.Time, since map[types.UID]metav1.Time) v1alpha1.ParentFailure {
	reason, _ := cond["reason"].(string)
	message, _ := cond["message"].(string)
	out := v1alpha1.ParentFailure{Reason: reason, Message: message}
	if reason == "" && known {
		out.Reason, out.Message = seen.Reason, seen.Message
	}
	if out.Reason == "" {
		out.Reason = unknownReason
	}
	var at metav1.Time
	if s, _ := cond["lastTransitionTime"].(string); s != "" && at.UnmarshalQueryParameter(s) == nil {
		out.Time = at
		return out
	}
	switch t, ok := f.since[controller][p.GetUID()]; {
	case known:
		out.Time = seen.Time
	case ok:
		out.Time = t
	default:
		out.Time = now
	}
	since[p.GetUID()] = out.Time
	return out
}

// later tells whether failure a is later than b (nil: none): by time, then
// by parent, so that every process picks the same among failures of the
// same second.
func later(a, b *v1alpha1.ParentFailure) bool {
	if b == nil {
		return true
	}
	if c := a.Time.Compare(b.Time.Time); c != 0 {
		return c > 0
	}
	return cmp.Compare(a.Parent, b.Parent) > 0
}

// lastFailure is the controller's lastFailure to write: the latest failure
// of a parent now failing when it is later than the one written, or is a
// newer word on the same failure (the same parent since the same time);
// else the one written, which is kept after its parent recovers. Every
// process that reports picks the same.
func lastFailure(written, latest *v1alpha1.ParentFailure) *v1alpha1.ParentFailure {
	switch {
	case latest == nil:
		return written
	case written == nil, later(latest, written):
		return latest
	case latest.Parent == written.Parent && latest.Time.Equal(&written.Time):
		return latest
	}
	return written
}

// reportFailures reports on the controllers whose failing parents may have
// changed until ctx ends.
func (r *Registry) reportFailures(ctx context.Context) {
	for {
		name, quit := r.failures.queue.Get()
		if quit {
			return
		}
		r.reportFailuresOf(ctx, name)
		r.failures.queue.Done(name)
	}
}

func (r *Registry) reportFailuresOf(ctx context.Context, name string) {
	ctl, ok := r.Get(name)
	if !ok || !counted(ctl) {
		return
	}
	obj, exists, err := r.ucs.GetIndexer().GetByKey(name)
	if err != nil || !exists {
		return
	}
	parentCache, ok := r.owned.synced(ctl.Parent.GVR)
	if !ok {
		// Its informer is being replaced (the controller's parent
		// resource changed): the next registration reports.
		return
	}
	parents, err := r.mayBeFailing(parentCache, name, ctl.ParentSelector)
	if err != nil {
		r.log.Error("list parents to count the failing ones", "controller", name, "err", err)
		return
	}
	uc, err := compact.Decode(obj)
	if err != nil {
		r.log.Error("report failing parents", "controller", name, "err", err)
		return
	}
	count, latest := r.failures.count(name, parents, metav1.Now().Rfc3339Copy())
	_, status := statusOf(uc)
	if err := r.status.reportFailures(ctx, uc, count, lastFailure(status.LastFailure, latest)); err != nil {
		r.log.Error("report failing parents; will retry", "controller", name, "err", err, "retryIn", retryDelay)
		r.failures.queue.AddAfter(name, retryDelay)
	}
}

// mayBeFailing lists, decoded, the cached parents of a controller that sel
// selects and that may count as failing: their JSON says False, or this
// process's appliers saw them fail. The report runs every second while
// parents change, over all of them: the others are not decoded.
func (r *Registry) mayBeFailing(parents cache.Indexer, controller string, sel labels.Selector) ([]*unstructured.Unstructured, error) {
	var objs []any
	err := cache.ListAll(parents, sel, func(o any) {
		if m, ok := compact.Meta(o); ok && (mayFail(o) || r.failures.saw(m.GetUID(), controller)) {
			objs = append(objs, o)
		}
	})
	if err != nil {
		return nil, err
	}
	return decodeAll(objs, compact.Decode)
}

// saw tells whether this process's appliers saw the parent fail under the
// controller, and have not seen it applied since.
func (f *failures) saw(uid types.UID, controller string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.seen[uid][controller]
	return ok
}

// cacheKey is an object's namespace/name, or its name when cluster-scoped.
func cacheKey(obj *unstructured.Unstructured) string {
	if obj.GetNamespace() == "" {
		return obj.GetName()
	}
	return obj.GetNamespace() + "/" + obj.GetName()
}
