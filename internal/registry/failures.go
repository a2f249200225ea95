package registry

import (
	"context"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// failures tallies, per controller, the parents whose latest apply failed.
// The applier reports every apply's outcome; the UniversalController's
// status shows the count and the latest failure. A failing parent that is
// deleted leaves the tally at the next sweep.
type failures struct {
	queue workqueue.TypedDelayingInterface[string] // controllers to report on

	mu           sync.Mutex
	byController map[string]*tally
}

// tally is one controller's failing parents.
type tally struct {
	parents map[types.UID]string // namespace/name of each failing parent
	last    *v1alpha1.ParentFailure
}

const (
	// reportDelay gathers the failures of many parents into one write of
	// the UniversalController's status.
	reportDelay = time.Second
	// sweepPeriod is how often a controller with failing parents is
	// reported on again, without the ones deleted since.
	sweepPeriod = 30 * time.Second
)

func newFailures() *failures {
	return &failures{
		queue:        workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[string]{Name: "parent-failures"}),
		byController: map[string]*tally{},
	}
}

// ParentFailed records that the latest apply to a parent of controller
// failed, for the reason of the Warning Event recorded on the parent.
func (r *Registry) ParentFailed(controller string, parent *unstructured.Unstructured, reason, message string) {
	f := r.failures
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.byController[controller]
	if t == nil {
		t = &tally{parents: map[types.UID]string{}}
		f.byController[controller] = t
	}
	key := cacheKey(parent)
	_, was := t.parents[parent.GetUID()]
	t.parents[parent.GetUID()] = key
	if was && t.last != nil && t.last.Parent == key && t.last.Reason == reason && t.last.Message == message {
		return // the same failure again: nothing new to report
	}
	t.last = &v1alpha1.ParentFailure{Parent: key, Reason: reason, Message: message, Time: metav1.Now().Rfc3339Copy()}
	f.queue.AddAfter(controller, reportDelay)
}

// ParentApplied records that the latest apply to a parent of controller
// succeeded, and tells whether the parent was failing until then.
func (r *Registry) ParentApplied(controller string, parent *unstructured.Unstructured) (wasFailing bool) {
	f := r.failures
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.byController[controller]
	if t == nil {
		return false
	}
	if _, wasFailing = t.parents[parent.GetUID()]; wasFailing {
		delete(t.parents, parent.GetUID())
		f.queue.AddAfter(controller, reportDelay)
	}
	return wasFailing
}

// forget drops the tally of a controller that is gone.
func (f *failures) forget(controller string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.byController, controller)
}

// sweep drops the failing parents of a controller that no longer exist,
// and returns how many are left and the latest failure.
func (f *failures) sweep(controller string, exists func(key string, uid types.UID) bool) (int, *v1alpha1.ParentFailure) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.byController[controller]
	if t == nil {
		return 0, nil
	}
	for uid, key := range t.parents {
		if !exists(key, uid) {
			delete(t.parents, uid)
		}
	}
	return len(t.parents), t.last
}

// reportFailures reports on the controllers whose failing parents changed
// until ctx ends.
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
	if !ok {
		r.failures.forget(name)
		return
	}
	count, last := r.failures.sweep(name, func(key string, uid types.UID) bool {
		ns, n, _ := cache.SplitMetaNamespaceKey(key)
		p, err := r.Object(ctl.Parent.GVR, ns, n)
		return err == nil && p.GetUID() == uid
	})
	if count > 0 {
		r.failures.queue.AddAfter(name, sweepPeriod)
	}
	obj, exists, err := r.ucs.GetIndexer().GetByKey(name)
	if err != nil || !exists {
		return
	}
	if err := r.status.reportFailures(ctx, obj.(*unstructured.Unstructured), count, last); err != nil {
		r.log.Error("report failing parents", "controller", name, "err", err)
		r.failures.queue.AddAfter(name, reportDelay)
	}
}

// cacheKey is an object's namespace/name, or its name when cluster-scoped.
func cacheKey(obj *unstructured.Unstructured) string {
	if obj.GetNamespace() == "" {
		return obj.GetName()
	}
	return obj.GetNamespace() + "/" + obj.GetName()
}
