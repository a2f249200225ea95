// Package watcher is uc's watch core. It follows the parents and children of
// every registered controller through the registry's shared informers, maps
// each change to the parent it concerns, coalesces changes per parent in a
// rate-limited workqueue, and publishes one hook request per parent, carrying
// the full observed state, to JetStream.
package watcher

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"universalcontroller.dev/uc/internal/registry"
	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
)

// Publisher publishes a message to JetStream; jetstream.JetStream is one.
type Publisher interface {
	PublishMsg(ctx context.Context, msg *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error)
}

// Options tune a Watcher.
type Options struct {
	// Partitions is the number of partitions parents are spread over.
	Partitions int
	// Workers is the number of parents synced at once.
	Workers int
}

// parentKey names one parent of one controller.
type parentKey struct {
	Controller, Namespace, Name string
}

func (k parentKey) String() string {
	if k.Namespace == "" {
		return k.Name
	}
	return k.Namespace + "/" + k.Name
}

// Watcher publishes hook requests for the parents of registered controllers.
type Watcher struct {
	reg   *registry.Registry
	pub   Publisher
	opts  Options
	log   *slog.Logger
	queue workqueue.TypedRateLimitingInterface[parentKey]
	clock observationClock

	mu       sync.Mutex
	handlers map[string][]handler // by controller name
}

type handler struct {
	informer cache.SharedIndexInformer
	reg      cache.ResourceEventHandlerRegistration
}

// New makes a watcher over the registry's controllers.
func New(reg *registry.Registry, pub Publisher, opts Options, log *slog.Logger) *Watcher {
	if opts.Partitions <= 0 {
		opts.Partitions = bus.DefaultPartitions
	}
	if opts.Workers <= 0 {
		opts.Workers = 8
	}
	w := &Watcher{
		reg:  reg,
		pub:  pub,
		opts: opts,
		log:  log.With("component", "watcher"),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[parentKey](),
			workqueue.TypedRateLimitingQueueConfig[parentKey]{Name: "parents"}),
		handlers: map[string][]handler{},
	}
	reg.Subscribe(w.onController)
	return w
}

// Run syncs parents until ctx ends.
func (w *Watcher) Run(ctx context.Context) {
	defer w.queue.ShutDown()
	for range w.opts.Workers {
		go func() {
			for w.processNext(ctx) {
			}
		}()
	}
	<-ctx.Done()
}

func (w *Watcher) processNext(ctx context.Context) bool {
	key, quit := w.queue.Get()
	if quit {
		return false
	}
	defer w.queue.Done(key)
	if err := w.sync(ctx, key); err != nil {
		w.log.Error("sync parent", "controller", key.Controller, "parent", key.String(), "err", err)
		w.queue.AddRateLimited(key)
		return true
	}
	w.queue.Forget(key)
	return true
}

// onController follows a controller's registration: it swaps the event
// handlers on the shared informers of its parent and child resources.
func (w *Watcher) onController(old, cur *registry.Controller) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if old != nil {
		for _, h := range w.handlers[old.Name] {
			_ = h.informer.RemoveEventHandler(h.reg)
		}
		delete(w.handlers, old.Name)
	}
	if cur == nil {
		return
	}
	add := func(res registry.Resource, fn func(obj any)) {
		inf := w.reg.Informer(res.GVR)
		reg, err := inf.AddEventHandler(changeHandler(fn))
		if err != nil {
			w.log.Error("watch", "controller", cur.Name, "resource", res.GVR.String(), "err", err)
			return
		}
		w.handlers[cur.Name] = append(w.handlers[cur.Name], handler{inf, reg})
	}
	name := cur.Name
	add(cur.Parent, func(obj any) { w.enqueueParent(name, obj) })
	for _, child := range cur.Children {
		add(child.Resource, func(obj any) { w.enqueueOwner(name, obj) })
	}
}

// changeHandler calls fn for every add, delete and real update (one that
// changed the resourceVersion).
func changeHandler(fn func(obj any)) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: fn,
		UpdateFunc: func(oldObj, newObj any) {
			o, n := oldObj.(*unstructured.Unstructured), newObj.(*unstructured.Unstructured)
			if o.GetResourceVersion() != n.GetResourceVersion() {
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

func (w *Watcher) enqueueParent(controller string, obj any) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		w.queue.Add(parentKey{controller, u.GetNamespace(), u.GetName()})
	}
}

// enqueueOwner maps a child change to its parent: the controller owner when
// it is of the parent's kind, else every parent whose selector would adopt it.
func (w *Watcher) enqueueOwner(controller string, obj any) {
	u, ok := obj.(*unstructured.Unstructured)
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
			w.queue.Add(parentKey{controller, ns, ref.Name})
		}
		return
	}
	parents, err := w.reg.Lister(ctl.Parent.GVR).ByNamespace(ns).List(labels.Everything())
	if err != nil {
		return
	}
	for _, p := range parents {
		parent := p.(*unstructured.Unstructured)
		if sel, err := selectorOf(parent); err == nil && sel != nil && sel.Matches(labels.Set(u.GetLabels())) {
			w.queue.Add(parentKey{controller, ns, parent.GetName()})
		}
	}
}

// selectorOf is the parent's spec.selector, or nil when it has none.
func selectorOf(parent *unstructured.Unstructured) (labels.Selector, error) {
	raw, found, err := unstructured.NestedMap(parent.Object, "spec", "selector")
	if err != nil || !found {
		return nil, err
	}
	var ls metav1.LabelSelector
	b, err := json.Marshal(raw)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &ls); err != nil {
		return nil, fmt.Errorf("spec.selector: %w", err)
	}
	sel, err := metav1.LabelSelectorAsSelector(&ls)
	if err != nil || sel.Empty() {
		return nil, err
	}
	return sel, nil
}

// sync publishes the hook request of one parent with its current observed
// state. It is idempotent: syncing twice publishes the same state twice, and
// the request stream keeps only the latest request per parent.
func (w *Watcher) sync(ctx context.Context, key parentKey) error {
	ctl, ok := w.reg.Get(key.Controller)
	if !ok {
		return nil
	}
	obj, err := w.reg.Lister(ctl.Parent.GVR).ByNamespace(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	parent := obj.(*unstructured.Unstructured)
	if !ctl.ParentSelector.Matches(labels.Set(parent.GetLabels())) {
		return nil
	}
	hook := hooks.Sync
	if parent.GetDeletionTimestamp() != nil {
		if ctl.Spec.Hooks.Finalize == nil {
			return nil
		}
		hook = hooks.Finalize
	}
	children, err := w.children(ctl, parent, ctl.HookVersion(hook))
	if err != nil {
		return err
	}
	req := &hooks.SyncRequest{
		Controller: ctl.Object,
		Parent:     parent,
		Children:   children,
		Related:    hooks.GroupedObjects{},
		Finalizing: hook == hooks.Finalize,
	}
	if err := w.publish(ctx, ctl, parent, hook, req); err != nil {
		return err
	}
	if rs := ctl.Spec.ResyncPeriodSeconds; rs != nil && *rs > 0 {
		w.queue.AddAfter(key, time.Duration(*rs)*time.Second)
	}
	return nil
}

// children gathers the parent's observed children: those it controls, and
// orphans its spec.selector would adopt. Every declared kind has an entry.
func (w *Watcher) children(ctl *registry.Controller, parent *unstructured.Unstructured, version string) (hooks.GroupedObjects, error) {
	sel, err := selectorOf(parent)
	if err != nil {
		return nil, err
	}
	out := hooks.GroupedObjects{}
	for _, child := range ctl.Children {
		out[hooks.GroupKey(child.GVK.Kind, child.APIVersion())] = hooks.ObjectMap{}
		owned, err := w.reg.Owned(child.GVR, parent.GetUID())
		if err != nil {
			return nil, err
		}
		for _, o := range owned {
			out.Insert(hooks.ObjectKey(version, ctl.Parent.Namespaced, o), o)
		}
		if sel == nil {
			continue
		}
		candidates, err := w.reg.Lister(child.GVR).ByNamespace(parent.GetNamespace()).List(sel)
		if err != nil {
			return nil, err
		}
		for _, c := range candidates {
			if o := c.(*unstructured.Unstructured); metav1.GetControllerOfNoCopy(o) == nil && o.GetDeletionTimestamp() == nil {
				out.Insert(hooks.ObjectKey(version, ctl.Parent.Namespaced, o), o)
			}
		}
	}
	return out, nil
}

func (w *Watcher) publish(ctx context.Context, ctl *registry.Controller, parent *unstructured.Unstructured, hook string, req any) error {
	meta := bus.Meta{
		Address: bus.Address{
			Controller: ctl.Name,
			Hook:       hook,
			Partition:  bus.Partition(parent.GetUID(), w.opts.Partitions),
			ParentUID:  parent.GetUID(),
		},
		Namespace:       parent.GetNamespace(),
		Name:            parent.GetName(),
		Generation:      parent.GetGeneration(),
		ResourceVersion: parent.GetResourceVersion(),
		Observation:     w.clock.next(),
	}
	e := event.New()
	e.SetID(uuid.NewString())
	e.SetType(bus.RequestType(hook))
	e.SetSource("/universalcontroller/" + ctl.Name)
	e.SetSubject(meta.Key())
	e.SetTime(time.Now())
	meta.SetOn(&e)
	bus.SetTraceParent(&e, bus.NewTraceParent())
	if err := e.SetData(event.ApplicationJSON, req); err != nil {
		return fmt.Errorf("encode %s request: %w", hook, err)
	}
	msg, err := bus.ToMsg(ctx, meta.RequestSubject(), &e)
	if err != nil {
		return err
	}
	if _, err := w.pub.PublishMsg(ctx, msg, jetstream.WithMsgID(e.ID())); err != nil {
		return fmt.Errorf("publish %s request: %w", hook, err)
	}
	w.log.Debug("published", "controller", ctl.Name, "parent", meta.Key(), "hook", hook, "observation", meta.Observation)
	return nil
}

// observationClock hands out strictly increasing observation stamps: the
// wall clock in nanoseconds, bumped when it would not advance.
type observationClock struct {
	mu   sync.Mutex
	last int64
}

func (c *observationClock) next() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now().UnixNano()
	if now <= c.last {
		now = c.last + 1
	}
	c.last = now
	return now
}
