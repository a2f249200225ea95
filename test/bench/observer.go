package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"universalcontroller.dev/uc/examples/fanout"
)

// byParent indexes ConfigMaps by the Fanout they belong to.
const byParent = "parent"

// observer follows the Fanouts of one namespace and their ConfigMaps with
// informers, so convergence is read from a cache, not from N GETs, and it
// timestamps the moment each parent reaches the current goal.
type observer struct {
	ns         string
	fanouts    cache.SharedIndexInformer
	configMaps cache.SharedIndexInformer

	mu   sync.Mutex
	goal *goal
}

// goal is what the parents changed in one phase must reach.
type goal struct {
	reached func(parent string) bool
	changed map[string]time.Time // when the driver began changing each parent
	applied map[string]time.Time // when the observer saw each parent reach the goal
}

// startObserver starts the informers of ns and waits for their caches.
func startObserver(ctx context.Context, c clients, ns string) (*observer, error) {
	o := &observer{ns: ns}
	o.fanouts = dynamicinformer.NewFilteredDynamicSharedInformerFactory(c.dyn, 0, ns, nil).
		ForResource(fanout.GVR).Informer()
	cms := informers.NewSharedInformerFactoryWithOptions(c.kube, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = fanout.ParentLabel }))
	o.configMaps = cms.Core().V1().ConfigMaps().Informer()
	err := o.configMaps.AddIndexers(cache.Indexers{byParent: func(obj any) ([]string, error) {
		return []string{obj.(*corev1.ConfigMap).Labels[fanout.ParentLabel]}, nil
	}})
	if err != nil {
		return nil, err
	}
	for _, inf := range []cache.SharedIndexInformer{o.fanouts, o.configMaps} {
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    o.onEvent,
			UpdateFunc: func(_, obj any) { o.onEvent(obj) },
			DeleteFunc: o.onEvent,
		}); err != nil {
			return nil, err
		}
		go inf.Run(ctx.Done())
	}
	if !cache.WaitForCacheSync(ctx.Done(), o.fanouts.HasSynced, o.configMaps.HasSynced) {
		return nil, fmt.Errorf("observer of %s: caches did not sync", ns)
	}
	return o, nil
}

func (o *observer) onEvent(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	m, ok := obj.(metav1.Object)
	if !ok {
		return
	}
	parent := m.GetName()
	if cm, ok := obj.(*corev1.ConfigMap); ok {
		parent = cm.Labels[fanout.ParentLabel]
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	g := o.goal
	if g == nil {
		return
	}
	if _, changed := g.changed[parent]; !changed {
		return
	}
	if _, done := g.applied[parent]; !done && g.reached(parent) {
		g.applied[parent] = time.Now()
	}
}

// track sets the goal of the parents changed from now on.
func (o *observer) track(reached func(parent string) bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.goal = &goal{reached: reached, changed: map[string]time.Time{}, applied: map[string]time.Time{}}
}

// changing records that the driver is about to change parent.
func (o *observer) changing(parent string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.goal.changed[parent] = time.Now()
}

// reachedAll reports whether every one of the n parents reached the goal.
func (o *observer) reachedAll(n int) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.goal.applied) >= n
}

// progress says how many of the parents reached the goal, and names some
// that did not.
func (o *observer) progress(parents []string) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var late []string
	for _, p := range parents {
		if _, ok := o.goal.applied[p]; !ok {
			late = append(late, p)
		}
	}
	return fmt.Sprintf("%d of %d parents reached the goal, %d changed; not %s",
		len(o.goal.applied), len(parents), len(o.goal.changed), examples(late))
}

// outcome returns the change-to-applied latency of every parent that
// reached the goal, sorted, and when the last one did.
func (o *observer) outcome() ([]time.Duration, time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	lat := make([]time.Duration, 0, len(o.goal.applied))
	var last time.Time
	for p, at := range o.goal.applied {
		lat = append(lat, at.Sub(o.goal.changed[p]))
		if at.After(last) {
			last = at
		}
	}
	slices.Sort(lat)
	return lat, last
}

// fanout returns a parent from the cache, or nil.
func (o *observer) fanout(name string) *unstructured.Unstructured {
	obj, ok, _ := o.fanouts.GetIndexer().GetByKey(o.ns + "/" + name)
	if !ok {
		return nil
	}
	return obj.(*unstructured.Unstructured)
}

// uids returns the UIDs of the parents in the cache.
func (o *observer) uids() []types.UID {
	objs := o.fanouts.GetStore().List()
	out := make([]types.UID, len(objs))
	for i, obj := range objs {
		out[i] = obj.(*unstructured.Unstructured).GetUID()
	}
	return out
}

// children returns a parent's ConfigMaps from the cache.
func (o *observer) children(parent string) []*corev1.ConfigMap {
	objs, _ := o.configMaps.GetIndexer().ByIndex(byParent, parent)
	out := make([]*corev1.ConfigMap, len(objs))
	for i, obj := range objs {
		out[i] = obj.(*corev1.ConfigMap)
	}
	return out
}

// child returns one ConfigMap from the cache, or nil.
func (o *observer) child(name string) *corev1.ConfigMap {
	obj, ok, _ := o.configMaps.GetIndexer().GetByKey(o.ns + "/" + name)
	if !ok {
		return nil
	}
	return obj.(*corev1.ConfigMap)
}

// carrying counts a parent's ConfigMaps that carry payload.
func (o *observer) carrying(parent, payload string) int {
	n := 0
	for _, cm := range o.children(parent) {
		if cm.Data[fanout.PayloadKey] == payload {
			n++
		}
	}
	return n
}

// synced reports whether a parent's status shows its m children for its
// current generation, and its m ConfigMaps carry payload.
func (o *observer) synced(parent string, m int, payload string) bool {
	f := o.fanout(parent)
	if f == nil {
		return false
	}
	observed, _, _ := unstructured.NestedInt64(f.Object, "status", "observedGeneration")
	children, _, _ := unstructured.NestedInt64(f.Object, "status", "children")
	return observed == f.GetGeneration() && children == int64(m) && o.carrying(parent, payload) == m
}

// gone reports whether a parent and all its ConfigMaps are deleted.
func (o *observer) gone(parent string) bool {
	return o.fanout(parent) == nil && len(o.children(parent)) == 0
}
