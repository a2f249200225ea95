package registry

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"

	"universalcontroller.dev/uc/internal/compact"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// ownedInformers are the informers of the registered controllers'
// parents, children and revisions: one informerSet, or an applier
// replica's, one per partition it holds (heldSets).
type ownedInformers interface {
	// only makes user (a controller) use exactly gvrs, none when it is
	// gone; index adds indexers to the informer of gvr before it starts.
	only(user string, gvrs ...schema.GroupVersionResource)
	index(gvr schema.GroupVersionResource, indexers cache.Indexers) error
	waitSynced(ctx context.Context, gvrs ...schema.GroupVersionResource) error
	// caches are the caches of gvr, to read objects from.
	caches(gvr schema.GroupVersionResource) []cache.Indexer
	// synced is gvr's one cache, running and filled: false when there is
	// none, or more than one.
	synced(gvr schema.GroupVersionResource) (cache.Indexer, bool)
	addHandler(id handlerID, gvr schema.GroupVersionResource, h cache.ResourceEventHandler)
	removeHandler(id handlerID)
	cached() map[schema.GroupVersionResource]int
	unsynced() []string
	stopAll()
}

// WithHeldPartitions makes the registry an applier replica's in an
// installation whose watchers are sharded over that many partitions: its
// informers of the controllers' parents, children and revisions are one
// set per partition the replica holds (Hold, Release), each listing and
// watching only the objects labelled with that partition, and one more set
// of those that carry no partition label, or one that names no partition
// (the API server selects "universalcontroller.dev/partition notin
// (0,…,P-1)", which objects without the label match too): the parents
// nobody has labelled yet, and the children uc did not make, which it may
// adopt. Objects are read from all of them. A replica holding half the
// partitions caches half the labelled objects.
//
// The related informers, of namespaces and of the controller objects, are
// unfiltered. Such a registry has no single informer of a parent, child or
// revision resource (Informer, List and LastSyncResourceVersion panic:
// follow them with OnOwned), and it cannot report on UniversalControllers
// (WithStatus), which needs every parent.
func WithHeldPartitions(partitions int) Option {
	return func(r *Registry) {
		r.owned = newHeldSets(r.related.dyn, partitions, r.watchFailures)
	}
}

// heldSets are the owned informers of an applier replica's registry
// (WithHeldPartitions): one informerSet per partition held, and one of the
// objects in no partition. A controller uses its resources in every set;
// a handler follows its resource in every set.
type heldSets struct {
	dyn    dynamic.Interface
	onNew  func(schema.GroupVersionResource, cache.SharedIndexInformer)
	source *compact.Source // makes the informers, if set (WithSource)

	mu          sync.Mutex
	unlabelled  *informerSet
	byPartition map[int]*informerSet
	uses        map[string][]schema.GroupVersionResource // by user
	handlers    map[handlerID]ownedHandler
}

func newHeldSets(dyn dynamic.Interface, partitions int, onNew func(schema.GroupVersionResource, cache.SharedIndexInformer)) *heldSets {
	h := &heldSets{
		dyn:         dyn,
		onNew:       onNew,
		byPartition: map[int]*informerSet{},
		uses:        map[string][]schema.GroupVersionResource{},
		handlers:    map[handlerID]ownedHandler{},
	}
	h.unlabelled = h.newSet(unlabelledSelector(partitions))
	return h
}

// newSet is a set of informers selecting objects with selector, each with
// the owner and orphan indexes.
func (h *heldSets) newSet(selector string) *informerSet {
	s := newInformerSet(h.dyn)
	s.selector, s.onNew, s.source = selector, h.onNew, h.source
	s.indexers = cache.Indexers{ownerIndex: indexByController, orphanIndex: indexOrphans}
	return s
}

// useSource makes the sets' informers of source (WithSource), before any
// is made.
func (h *heldSets) useSource(source *compact.Source) {
	h.source, h.unlabelled.source = source, source
}

// unlabelledSelector selects the objects whose partition label names none
// of the partitions, or that have none.
func unlabelledSelector(partitions int) string {
	values := make([]string, partitions)
	for n := range partitions {
		values[n] = strconv.Itoa(n)
	}
	req, err := labels.NewRequirement(v1alpha1.LabelPartition, selection.NotIn, values)
	if err != nil {
		panic(fmt.Sprintf("registry.WithHeldPartitions(%d): %v", partitions, err))
	}
	return labels.NewSelector().Add(*req).String()
}

// sets are every set: the partitions' and the unlabelled one.
func (h *heldSets) sets() []*informerSet {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append(slices.Collect(maps.Values(h.byPartition)), h.unlabelled)
}

// hold starts the informers of partition n, which fill its caches
// (waitHeld); objects are read from them at once.
func (h *heldSets) hold(n int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.byPartition[n] != nil {
		return
	}
	s := h.newSet(partitionSelector([]int{n}))
	for id, hd := range h.handlers {
		s.addHandler(id, hd.gvr, hd.h)
	}
	for user, gvrs := range h.uses {
		s.use(user, gvrs...)
	}
	h.byPartition[n] = s
}

// waitHeld waits until the caches of partition n, held, are filled.
func (h *heldSets) waitHeld(ctx context.Context, n int) error {
	h.mu.Lock()
	s := h.byPartition[n]
	var gvrs []schema.GroupVersionResource
	for _, used := range h.uses {
		gvrs = append(gvrs, used...)
	}
	h.mu.Unlock()
	if s == nil {
		return fmt.Errorf("partition %d is not held", n)
	}
	slices.SortFunc(gvrs, func(a, b schema.GroupVersionResource) int { return strings.Compare(a.String(), b.String()) })
	return s.waitSynced(ctx, slices.Compact(gvrs)...)
}

// release stops the informers of partition n.
func (h *heldSets) release(n int) {
	h.mu.Lock()
	s := h.byPartition[n]
	delete(h.byPartition, n)
	h.mu.Unlock()
	if s != nil {
		s.stopAll()
	}
}

func (h *heldSets) only(user string, gvrs ...schema.GroupVersionResource) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(gvrs) == 0 {
		delete(h.uses, user)
	} else {
		h.uses[user] = slices.Clone(gvrs)
	}
	h.unlabelled.only(user, gvrs...)
	for _, s := range h.byPartition {
		s.only(user, gvrs...)
	}
}

// index needs nothing: every informer of the sets has the owner and orphan
// indexes from the start.
func (h *heldSets) index(schema.GroupVersionResource, cache.Indexers) error { return nil }

func (h *heldSets) waitSynced(ctx context.Context, gvrs ...schema.GroupVersionResource) error {
	for _, s := range h.sets() {
		if err := s.waitSynced(ctx, gvrs...); err != nil {
			return err
		}
	}
	return nil
}

// caches are the running caches of gvr: the partitions', then the
// unlabelled one.
func (h *heldSets) caches(gvr schema.GroupVersionResource) []cache.Indexer {
	var out []cache.Indexer
	for _, s := range h.sets() {
		if c, ok := s.running(gvr); ok {
			out = append(out, c)
		}
	}
	return out
}

// synced: the sets hold no single cache of a resource.
func (h *heldSets) synced(schema.GroupVersionResource) (cache.Indexer, bool) { return nil, false }

func (h *heldSets) addHandler(id handlerID, gvr schema.GroupVersionResource, handler cache.ResourceEventHandler) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.handlers[id] = ownedHandler{gvr: gvr, h: handler}
	h.unlabelled.addHandler(id, gvr, handler)
	for _, s := range h.byPartition {
		s.addHandler(id, gvr, handler)
	}
}

func (h *heldSets) removeHandler(id handlerID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.handlers, id)
	h.unlabelled.removeHandler(id)
	for _, s := range h.byPartition {
		s.removeHandler(id)
	}
}

func (h *heldSets) cached() map[schema.GroupVersionResource]int {
	out := map[schema.GroupVersionResource]int{}
	for _, s := range h.sets() {
		for gvr, n := range s.cached() {
			out[gvr] += n
		}
	}
	return out
}

func (h *heldSets) unsynced() []string {
	var out []string
	for _, s := range h.sets() {
		out = append(out, s.unsynced()...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func (h *heldSets) stopAll() {
	for _, s := range h.sets() {
		s.stopAll()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	clear(h.byPartition)
}

// Hold starts the informers of the parents, children and revisions of
// partition n, which this applier replica now holds (WithHeldPartitions;
// otherwise nothing to do): objects are read from their caches at once,
// and WaitHeld waits until they are filled.
func (r *Registry) Hold(n int) {
	if h, ok := r.owned.(*heldSets); ok {
		h.hold(n)
	}
}

// WaitHeld waits until the caches of partition n, held, are filled, or
// ctx ends.
func (r *Registry) WaitHeld(ctx context.Context, n int) error {
	h, ok := r.owned.(*heldSets)
	if !ok {
		return nil
	}
	if err := h.waitHeld(ctx, n); err != nil {
		return fmt.Errorf("partition %d: %w", n, err)
	}
	return nil
}

// Release stops the informers of partition n, which this applier replica
// no longer holds.
func (r *Registry) Release(n int) {
	if h, ok := r.owned.(*heldSets); ok {
		h.release(n)
	}
}
