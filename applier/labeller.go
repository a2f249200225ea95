package applier

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"universalcontroller.dev/uc/core"
	"universalcontroller.dev/uc/internal/compact"
	"universalcontroller.dev/uc/internal/recovery"
	"universalcontroller.dev/uc/internal/workloop"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// Sharded watchers list and watch only the objects labelled with the
// partitions they hold (v1alpha1.LabelPartition, selected by the API
// server): an object without the label is seen by no watcher. The labeller
// keeps the label on the parents, children and revisions of every
// controller whose watchers are sharded (core.Controller.Partitions):
//
//   - a parent without a label that names a partition gets one when it is
//     created (core.Controller.PartitionOf), and one whose label someone
//     set to no partition gets it set back, with a Warning Event;
//   - a child or revision gets its parent's: uc's writes carry it from
//     their creation, and the labeller labels those made before sharding
//     was turned on, those whose label someone changed, and those of a
//     parent someone moved to another partition by hand.
//
// The applier replica that applies a parent's replies labels its objects:
// the one holding the parent's partition (core.Controller.Partition). It
// looks over every object again when it takes partitions.
//
// When the replica caches only the partitions it holds and the objects in
// none (partitioned: registry.WithHeldPartitions), an object labelled with
// a partition it holds whose parent is in none of its caches was moved by
// hand — the object, or its parent — and this replica, the only one that
// sees it, labels it with its parent's partition, read from the API server.
// It looks for such objects when a parent leaves its caches (labelled
// with a partition it does not hold, or deleted) and when it sees one
// added.
type labeller struct {
	reg         Registry
	dyn         dynamic.Interface
	events      record.EventRecorder
	log         *slog.Logger
	partitions  int
	holds       func(n int) bool
	partitioned bool
	queue       workqueue.TypedRateLimitingInterface[labelKey]
	rescans     chan struct{}
	// removed are the parents whose label someone removed, with the label
	// they had: their new label is reported as set back.
	removed sync.Map // labelKey → removedLabel

	mu       sync.Mutex
	handlers map[string][]func() // by controller name: what removes them
}

// removedLabel is the label someone removed from a parent.
type removedLabel struct {
	label string
	uid   types.UID
}

const (
	// unknownParentDelay is how long an object labelled with a partition
	// held waits for its parent to be cached before the parent is read
	// from the API server: the caches of a partition just taken fill one
	// resource after another.
	unknownParentDelay = 5 * time.Second
	// goneDelay is how long after a parent left this replica's caches its
	// children still cached are looked at: a deleted parent's are mostly
	// deleted by the garbage collector meanwhile; those left cost one read
	// of the parent.
	goneDelay = 10 * time.Second
)

// labelKey is an object the labeller checks: a parent or one of a parent's
// objects, of a controller.
type labelKey struct {
	controller      string
	gvr             schema.GroupVersionResource
	namespace, name string
	// parent is set for a parent; decorated, for a decorator's, to the
	// decorated resource's key (core.Resource.Key).
	parent    bool
	decorated string
	// gone is set for a parent, of that uid, that left this replica's
	// caches: its children still cached are checked.
	gone bool
	uid  types.UID
}

func newLabeller(reg Registry, dyn dynamic.Interface, events record.EventRecorder, partitions int, holds func(int) bool, partitioned bool, log *slog.Logger) *labeller {
	return &labeller{
		reg: reg, dyn: dyn, events: events, partitions: partitions, holds: holds, partitioned: partitioned,
		log: log.With("component", "labeller"),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[labelKey](),
			workqueue.TypedRateLimitingQueueConfig[labelKey]{Name: "partition-labels"}),
		rescans:  make(chan struct{}, 1),
		handlers: map[string][]func(){},
	}
}

// labelWorkers label at once: a burst of new parents each waits for its
// label PATCH, one round trip to a busy apiserver, and a parent not yet
// labelled costs reads and writes of its own (with 2 workers, at 10,000
// parents and 2 shards: 787 GETs against 15, 20 % longer to converge, and
// a backlog of keys in the applier's heap).
const labelWorkers = 8

// run labels until ctx ends.
func (l *labeller) run(ctx context.Context) {
	unsubscribe := l.reg.Subscribe(l.onController)
	defer unsubscribe()
	go func() {
		<-ctx.Done()
		l.queue.ShutDown()
	}()
	workloop.Loop[labelKey]{
		Component: recovery.Applier, Timeout: 30 * time.Second, Sync: l.sync, Log: l.log,
		LogArgs: func(k labelKey) []any {
			return []any{"controller", k.controller, "resource", k.gvr.Resource, "object", cache.NewObjectName(k.namespace, k.name).String()}
		},
	}.Run(ctx, l.queue, labelWorkers)
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.rescans:
			l.scan()
		}
	}
}

// rescan looks over every object again, soon: this replica took
// partitions.
func (l *labeller) rescan() {
	select {
	case l.rescans <- struct{}{}:
	default:
	}
}

// onController follows a sharded controller's parents, children and
// revisions through their shared informers.
func (l *labeller) onController(old, cur *core.Controller) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if old != nil {
		for _, remove := range l.handlers[old.Name] {
			remove()
		}
		delete(l.handlers, old.Name)
	}
	if cur == nil || cur.Partitions == 0 {
		return
	}
	for _, k := range l.resources(cur) {
		l.handlers[cur.Name] = append(l.handlers[cur.Name], l.reg.OnOwned(k.gvr, l.handler(cur, k)))
	}
}

// handler checks the objects of the resource of k as they are cached.
func (l *labeller) handler(cur *core.Controller, k labelKey) cache.ResourceEventHandler {
	enqueue := func(obj any) {
		if m, ok := compact.Meta(obj); ok {
			l.check(k, m)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue,
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := compact.Meta(oldObj)
			n, ok2 := compact.Meta(newObj)
			if k.parent && ok1 && ok2 {
				was, had := o.GetLabels()[v1alpha1.LabelPartition]
				is, has := n.GetLabels()[v1alpha1.LabelPartition]
				if had && !has {
					l.removed.Store(objectKey(k, n), removedLabel{was, n.GetUID()})
				}
				if was != is {
					l.children(cur, n) // moved: its children follow
				}
			}
			enqueue(newObj)
		},
		DeleteFunc: func(obj any) {
			if l.partitioned {
				l.left(cur, k, obj)
			}
		},
	}
}

// objectKey is k for obj.
func objectKey(k labelKey, obj metav1.Object) labelKey {
	k.namespace, k.name = obj.GetNamespace(), obj.GetName()
	return k
}

// left hears that an object left one of this replica's partitioned
// caches: it was deleted, or labelled with a partition of another cache
// (by uc, or by hand) — the API server tells both alike. It is checked
// again now: the cache it entered may have shown it first, while this one
// still held it with its old label, and the registry reads the first
// cache that holds it.
//
// A parent's children still cached are checked soon too. A parent's label
// removed is remembered, to be reported when the parent, in the cache of
// the objects in no partition, gets it back.
func (l *labeller) left(ctl *core.Controller, k labelKey, obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	m, ok := compact.Meta(obj)
	if !ok {
		return
	}
	if !k.parent {
		l.queue.Add(objectKey(k, m))
		return
	}
	if !l.isParent(ctl, k, m) {
		return
	}
	k = objectKey(k, m)
	if label := m.GetLabels()[v1alpha1.LabelPartition]; ctl.ValidPartition(label) {
		l.removed.Store(k, removedLabel{label, m.GetUID()})
	}
	l.queue.Add(k)
	k.gone, k.uid = true, m.GetUID()
	l.queue.AddAfter(k, goneDelay)
}

// resources are the resources of a controller's objects that carry the
// label, as labelKeys without an object.
func (l *labeller) resources(ctl *core.Controller) []labelKey {
	var out []labelKey
	if ctl.Decorator == nil {
		out = append(out, labelKey{controller: ctl.Name, gvr: ctl.Parent.GVR, parent: true})
	} else {
		for _, d := range ctl.Decorator.Resources {
			out = append(out, labelKey{controller: ctl.Name, gvr: d.GVR, parent: true, decorated: d.Key()})
		}
	}
	for _, ch := range ctl.Children {
		out = append(out, labelKey{controller: ctl.Name, gvr: ch.GVR})
	}
	if ctl.Rolling() {
		out = append(out, labelKey{controller: ctl.Name, gvr: v1alpha1.RevisionResource})
	}
	return out
}

// scan checks every cached object of every sharded controller.
func (l *labeller) scan() {
	l.mu.Lock()
	names := make([]string, 0, len(l.handlers))
	for name := range l.handlers {
		names = append(names, name)
	}
	l.mu.Unlock()
	for _, name := range names {
		ctl, ok := l.reg.Get(name)
		if !ok || ctl.Partitions == 0 {
			continue
		}
		for _, k := range l.resources(ctl) {
			l.reg.EachOwned(k.gvr, func(m metav1.Object) { l.check(k, m) })
		}
	}
}

// children checks a parent's children and revisions.
func (l *labeller) children(ctl *core.Controller, parent metav1.Object) {
	for _, k := range l.resources(ctl) {
		if k.parent {
			continue
		}
		objs, err := l.reg.Owned(k.gvr, parent.GetNamespace(), parent.GetUID())
		if err != nil {
			l.log.Warn("list a parent's objects", "controller", ctl.Name, "parent", cache.MetaObjectToName(parent).String(), "err", err)
			continue
		}
		for _, obj := range objs {
			l.check(k, obj)
		}
	}
}

// check queues obj, an object of the resource of k, when this replica
// labels it and its label is not the one it should carry; or, when its
// parent is in none of this replica's caches, soon, to read its parent
// then.
func (l *labeller) check(k labelKey, obj metav1.Object) {
	k = objectKey(k, obj)
	ctl, ok := l.reg.Get(k.controller)
	if !ok {
		return
	}
	want, partition, ok := l.want(ctl, k, obj)
	switch {
	case ok:
		if l.holds(partition) && obj.GetLabels()[v1alpha1.LabelPartition] != want {
			l.queue.Add(k)
		}
	case l.uncachedParent(ctl, k, obj):
		l.queue.AddAfter(k, unknownParentDelay)
	}
}

// uncachedParent tells an object whose parent is in none of the
// partitioned caches, and which this replica labels: one labelled with a
// partition it holds. (An object in no partition is its parent's
// partition's holder's, which caches both.)
func (l *labeller) uncachedParent(ctl *core.Controller, k labelKey, obj metav1.Object) bool {
	if !l.partitioned || k.parent {
		return false
	}
	label := obj.GetLabels()[v1alpha1.LabelPartition]
	if !ctl.ValidPartition(label) {
		return false
	}
	n, _ := strconv.Atoi(label)
	_, _, ok := l.parentRef(ctl, obj)
	return ok && l.holds(n)
}

// want is the label obj should carry, and the partition of its parent,
// whose holder labels it; false for an object that is none of the
// controller's.
func (l *labeller) want(ctl *core.Controller, k labelKey, obj metav1.Object) (string, int, bool) {
	parent := obj
	if k.parent && !l.isParent(ctl, k, obj) {
		return "", 0, false
	}
	if !k.parent {
		var ok bool
		if parent, ok = l.parentOf(ctl, obj); !ok {
			return "", 0, false
		}
	}
	value, ok := ctl.PartitionOf(parent)
	return value, ctl.Partition(parent, l.partitions), ok
}

// isParent tells whether obj is one of the controller's parents: selected
// by its parent selector, or decorated by the decorator.
func (l *labeller) isParent(ctl *core.Controller, k labelKey, obj metav1.Object) bool {
	if ctl.Decorator == nil {
		return ctl.ParentSelector.Matches(labels.Set(obj.GetLabels()))
	}
	d, ok := ctl.Decorator.Decorated(k.decorated)
	return ok && ctl.Decorates(d, obj)
}

// parentOf is the cached parent that controls obj, a child, an attachment
// or a revision.
func (l *labeller) parentOf(ctl *core.Controller, obj metav1.Object) (metav1.Object, bool) {
	res, ref, ok := l.parentRef(ctl, obj)
	if !ok {
		return nil, false
	}
	parent, err := l.reg.Meta(res.GVR, parentNamespace(res, obj), ref.Name)
	if err == nil && parent.GetUID() == ref.UID {
		return parent, true
	}
	return nil, false
}

// parentRef is the reference of obj, a child, an attachment or a
// revision, to the parent that controls it, and the parent's resource.
func (l *labeller) parentRef(ctl *core.Controller, obj metav1.Object) (core.Resource, *metav1.OwnerReference, bool) {
	ref := metav1.GetControllerOfNoCopy(obj)
	if ref == nil {
		return core.Resource{}, nil, false
	}
	resources := []core.Resource{ctl.Parent}
	if ctl.Decorator != nil {
		if !ctl.IsAttachment(obj) {
			return core.Resource{}, nil, false
		}
		resources = resources[:0]
		for _, d := range ctl.Decorator.Resources {
			resources = append(resources, d.Resource)
		}
	}
	for _, res := range resources {
		if ref.APIVersion == res.APIVersion() && ref.Kind == res.GVK.Kind {
			return res, ref, true
		}
	}
	return core.Resource{}, nil, false
}

// parentNamespace is the namespace of obj's parent of resource res: obj's,
// or none for a cluster-scoped parent.
func parentNamespace(res core.Resource, obj metav1.Object) string {
	if res.Namespaced {
		return obj.GetNamespace()
	}
	return ""
}

// readParent is the label obj, labelled with a partition this replica
// holds whose parent is in none of its caches (uncachedParent), should
// carry: its parent's, read from the API server. false when the parent is
// gone (its children follow it).
func (l *labeller) readParent(ctx context.Context, ctl *core.Controller, obj metav1.Object) (string, int, bool, error) {
	res, ref, _ := l.parentRef(ctl, obj)
	ns := parentNamespace(res, obj)
	parent, err := l.dyn.Resource(res.GVR).Namespace(ns).Get(ctx, ref.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return "", 0, false, nil
	case err != nil:
		return "", 0, false, fmt.Errorf("read the parent %s: %w", cache.NewObjectName(ns, ref.Name), err)
	case parent.GetUID() != ref.UID:
		return "", 0, false, nil
	}
	want, ok := ctl.PartitionOf(parent)
	n, _ := strconv.Atoi(obj.GetLabels()[v1alpha1.LabelPartition])
	return want, n, ok, nil
}

// sync labels one object as its cached state says it should be, with a
// patch conditioned on that state's resourceVersion.
func (l *labeller) sync(ctx context.Context, k labelKey) error {
	ctl, ok := l.reg.Get(k.controller)
	if !ok {
		return nil
	}
	if k.gone {
		return l.gone(ctx, ctl, k)
	}
	obj, err := l.reg.Meta(k.gvr, k.namespace, k.name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	want, partition, ok := l.want(ctl, k, obj)
	if !ok && l.uncachedParent(ctl, k, obj) {
		if want, partition, ok, err = l.readParent(ctx, ctl, obj); err != nil {
			return err
		}
	}
	had, labelled := obj.GetLabels()[v1alpha1.LabelPartition]
	if !ok || !l.holds(partition) || had == want {
		return nil
	}
	err = relabel(ctx, l.dyn.Resource(k.gvr).Namespace(k.namespace), ctl, obj, want)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("label %s %s with partition %s: %w", k.gvr.Resource, cache.NewObjectName(k.namespace, k.name), want, err)
	}
	if was, ok := l.removed.LoadAndDelete(k); ok && !labelled && was.(removedLabel).uid == obj.GetUID() {
		l.report(ctl, k, obj, fmt.Sprintf("removed (it was %q)", was.(removedLabel).label), want)
		return nil
	}
	if labelled {
		l.report(ctl, k, obj, fmt.Sprintf("%q", had), want)
		return nil
	}
	// A new parent's, or a child's made before sharding.
	l.log.Debug("labelled with its partition", "controller", ctl.Name, "resource", k.gvr.Resource, "object", cache.MetaObjectToName(obj).String(), "partition", want)
	return nil
}

// gone checks the children still cached of a parent that left this
// replica's caches: with the parent back in another of them, as usual;
// otherwise, if the parent still exists (read once from the API server),
// each reads it (sync) and follows it to its partition. A deleted
// parent's are left to the garbage collector.
func (l *labeller) gone(ctx context.Context, ctl *core.Controller, k labelKey) error {
	uid := k.uid
	k.gone, k.uid = false, ""
	if was, ok := l.removed.Load(k); ok && was.(removedLabel).uid == uid {
		// Deleted, or labelled by now: nothing left to report.
		l.removed.CompareAndDelete(k, was)
	}
	if parent, err := l.reg.Meta(k.gvr, k.namespace, k.name); err == nil && parent.GetUID() == uid {
		l.check(k, parent)
		l.children(ctl, parent)
		return nil
	}
	var children []labelKey
	for _, r := range l.resources(ctl) {
		if r.parent {
			continue
		}
		objs, err := l.reg.Owned(r.gvr, k.namespace, uid)
		if err != nil {
			return fmt.Errorf("list the objects of %s: %w", cache.NewObjectName(k.namespace, k.name), err)
		}
		for _, obj := range objs {
			if l.uncachedParent(ctl, r, obj) {
				children = append(children, objectKey(r, obj))
			}
		}
	}
	if len(children) == 0 {
		return nil
	}
	parent, err := l.dyn.Resource(k.gvr).Namespace(k.namespace).Get(ctx, k.name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("read the parent %s: %w", cache.NewObjectName(k.namespace, k.name), err)
	case parent.GetUID() != uid:
		return nil
	}
	for _, c := range children {
		l.queue.Add(c)
	}
	return nil
}

// relabel labels obj, as read at its resourceVersion, with partition want,
// as uc's partition field manager of ctl.
func relabel(ctx context.Context, res dynamic.ResourceInterface, ctl *core.Controller, obj metav1.Object, want string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": obj.GetResourceVersion(),
		"labels":          map[string]string{v1alpha1.LabelPartition: want},
	}})
	if err != nil {
		return err
	}
	_, err = res.Patch(ctx, obj.GetName(), types.MergePatchType, patch, metav1.PatchOptions{FieldManager: v1alpha1.FieldManager(ctl.Name) + "/partition"})
	return err
}

// report tells of a label someone changed by hand, set back: a log line,
// and on a parent a Warning Event.
func (l *labeller) report(ctl *core.Controller, k labelKey, obj metav1.Object, was, want string) {
	l.log.Warn("partition label set back", "controller", ctl.Name, "resource", k.gvr.Resource, "object", cache.MetaObjectToName(obj).String(),
		"partition", want, "was", was)
	if !k.parent {
		return // the log line names the child; its parent hears nothing it must act on
	}
	if ref, ok := obj.(runtime.Object); ok { // a cached object: kind and metadata
		l.events.Eventf(ref, "Warning", "PartitionLabel",
			"label %s was %s, not one of the partitions 0 to %d: set back to %s, this object's partition", v1alpha1.LabelPartition, was, l.partitions-1, want)
	}
}
