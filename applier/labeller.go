package applier

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
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
type labeller struct {
	reg        Registry
	dyn        dynamic.Interface
	events     record.EventRecorder
	log        *slog.Logger
	partitions int
	holds      func(n int) bool
	queue      workqueue.TypedRateLimitingInterface[labelKey]
	rescans    chan struct{}
	// removed are the parents whose label someone removed, with the label
	// they had: their new label is reported as set back.
	removed sync.Map // labelKey → string

	mu       sync.Mutex
	handlers map[string][]labelHandler // by controller name
}

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
}

type labelHandler struct {
	informer cache.SharedIndexInformer
	reg      cache.ResourceEventHandlerRegistration
}

func newLabeller(reg Registry, dyn dynamic.Interface, events record.EventRecorder, partitions int, holds func(int) bool, log *slog.Logger) *labeller {
	return &labeller{
		reg: reg, dyn: dyn, events: events, partitions: partitions, holds: holds,
		log: log.With("component", "labeller"),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[labelKey](),
			workqueue.TypedRateLimitingQueueConfig[labelKey]{Name: "partition-labels"}),
		rescans:  make(chan struct{}, 1),
		handlers: map[string][]labelHandler{},
	}
}

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
	}.Run(ctx, l.queue, 2)
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
		for _, h := range l.handlers[old.Name] {
			_ = h.informer.RemoveEventHandler(h.reg)
		}
		delete(l.handlers, old.Name)
	}
	if cur == nil || cur.Partitions == 0 {
		return
	}
	for _, k := range l.resources(cur) {
		inf := l.reg.Informer(k.gvr)
		enqueue := func(obj any) {
			if m, ok := compact.Meta(obj); ok {
				l.check(k, m)
			}
		}
		reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: enqueue,
			UpdateFunc: func(oldObj, newObj any) {
				o, ok1 := compact.Meta(oldObj)
				n, ok2 := compact.Meta(newObj)
				if k.parent && ok1 && ok2 {
					was, had := o.GetLabels()[v1alpha1.LabelPartition]
					is, has := n.GetLabels()[v1alpha1.LabelPartition]
					if had && !has {
						l.removed.Store(labelKey{controller: k.controller, gvr: k.gvr, namespace: n.GetNamespace(), name: n.GetName(), parent: true, decorated: k.decorated}, was)
					}
					if was != is {
						l.children(cur, n) // moved: its children follow
					}
				}
				enqueue(newObj)
			},
		})
		if err != nil {
			l.log.Error("follow", "controller", cur.Name, "resource", k.gvr.String(), "err", err)
			continue
		}
		l.handlers[cur.Name] = append(l.handlers[cur.Name], labelHandler{informer: inf, reg: reg})
	}
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
			for _, obj := range l.reg.Informer(k.gvr).GetStore().List() {
				if m, ok := compact.Meta(obj); ok {
					l.check(k, m)
				}
			}
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
// labels it and its label is not the one it should carry.
func (l *labeller) check(k labelKey, obj metav1.Object) {
	k.namespace, k.name = obj.GetNamespace(), obj.GetName()
	ctl, ok := l.reg.Get(k.controller)
	if !ok {
		return
	}
	if want, partition, ok := l.want(ctl, k, obj); ok && l.holds(partition) &&
		obj.GetLabels()[v1alpha1.LabelPartition] != want {
		l.queue.Add(k)
	}
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
	ref := metav1.GetControllerOfNoCopy(obj)
	if ref == nil {
		return nil, false
	}
	resources := []core.Resource{ctl.Parent}
	if ctl.Decorator != nil {
		if !ctl.IsAttachment(obj) {
			return nil, false
		}
		resources = resources[:0]
		for _, d := range ctl.Decorator.Resources {
			resources = append(resources, d.Resource)
		}
	}
	for _, res := range resources {
		if ref.APIVersion != res.APIVersion() || ref.Kind != res.GVK.Kind {
			continue
		}
		ns := ""
		if res.Namespaced {
			ns = obj.GetNamespace()
		}
		parent, err := l.reg.Meta(res.GVR, ns, ref.Name)
		if err == nil && parent.GetUID() == ref.UID {
			return parent, true
		}
	}
	return nil, false
}

// sync labels one object as its cached state says it should be, with a
// patch conditioned on that state's resourceVersion.
func (l *labeller) sync(ctx context.Context, k labelKey) error {
	ctl, ok := l.reg.Get(k.controller)
	if !ok {
		return nil
	}
	obj, err := l.reg.Meta(k.gvr, k.namespace, k.name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	want, partition, ok := l.want(ctl, k, obj)
	had, labelled := obj.GetLabels()[v1alpha1.LabelPartition]
	if !ok || !l.holds(partition) || had == want {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": obj.GetResourceVersion(),
		"labels":          map[string]string{v1alpha1.LabelPartition: want},
	}})
	if err != nil {
		return err
	}
	_, err = l.dyn.Resource(k.gvr).Namespace(k.namespace).Patch(ctx, k.name, types.MergePatchType, patch,
		metav1.PatchOptions{FieldManager: v1alpha1.FieldManager(ctl.Name) + "/partition"})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("label %s %s with partition %s: %w", k.gvr.Resource, cache.NewObjectName(k.namespace, k.name), want, err)
	}
	if was, ok := l.removed.LoadAndDelete(k); ok && !labelled {
		l.report(ctl, k, obj, fmt.Sprintf("removed (it was %q)", was), want)
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
