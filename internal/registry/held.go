package registry

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"

	"universalcontroller.dev/uc/internal/compact"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// ownedInformers are the informers of the registered controllers'
// parents, children and revisions: one informerSet, or an applier
// replica's, one per group of the partitions it holds (heldSets).
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
// informers of the controllers' parents, children and revisions list and
// watch only the objects labelled with the partitions the replica holds
// (Hold, Release); one more set of informers watches those that carry no
// partition label, or one that names no partition (the API server selects
// "universalcontroller.dev/partition notin (0,…,P-1)", which objects
// without the label match too): the parents nobody has labelled yet, and
// the children uc did not make, which it may adopt. Objects are read from
// all of them. A replica holding half the partitions caches half the
// labelled objects.
//
// The partitions held are watched in groups, each one set of informers
// selecting "universalcontroller.dev/partition in (…)": the partitions
// taken within groupSettle of each other form one group, so that a
// replica taking its 16 partitions at start-up watches each resource
// twice, not 17 times — the API server hands every event of a resource to
// each of its watches, and at 50,000 parents it force-closed the watches
// of replicas that had one per partition. A partition released leaves its
// group's caches when the group's other partitions are watched anew,
// together, in a group that replaces it once filled (or at once, when
// none of them is held any more): giving partitions away costs a relist
// of those kept with them.
//
// The related informers, of namespaces and of the controller objects, are
// unfiltered. Such a registry has no single informer of a parent, child or
// revision resource (Informer, List and LastSyncResourceVersion panic:
// follow them with OnOwned), and it cannot report on UniversalControllers
// (WithStatus), which needs every parent.
func WithHeldPartitions(partitions int) Option {
	return func(r *Registry) {
		r.owned = newHeldSets(r.related.dyn, partitions, r.watchFailures, r.log)
	}
}

// groupSettle is how long the partitions an applier replica takes keep
// coming before they are watched as one group: a balance takes them one
// after another, each one a few round trips of the bus.
const groupSettle = 500 * time.Millisecond

// heldSets are the owned informers of an applier replica's registry
// (WithHeldPartitions): one informerSet per group of the partitions held,
// and one of the objects in no partition. A controller uses its resources
// in every set; a handler follows its resource in every set.
type heldSets struct {
	dyn    dynamic.Interface
	onNew  func(schema.GroupVersionResource, cache.SharedIndexInformer)
	source *compact.Source // makes the informers, if set (WithSource)
	settle time.Duration   // groupSettle, but in tests
	log    *slog.Logger

	mu         sync.Mutex
	unlabelled *informerSet
	// held are the partitions held, each with the group whose caches its
	// objects are read from: nil until the group of the partitions taken
	// with it is made.
	held map[int]*group
	// groups are the sets of informers running, oldest first: those of
	// the partitions held, those filling to replace them, and those that
	// still watch partitions released until their replacement is filled.
	groups   []*group
	uses     map[string][]schema.GroupVersionResource // by user
	handlers map[handlerID]ownedHandler
	// regroup runs settle after the last change of the partitions held
	// (nil before the first); none runs once stopped.
	regroup *time.Timer
	stopped bool
	// changed is closed, and replaced, each time a partition's group
	// changes (waitHeld).
	changed chan struct{}
}

// A group is one set of informers over some partitions.
type group struct {
	partitions []int
	set        *informerSet
	// adopt are the partitions this group takes over once its caches are
	// filled, each with the group that watched it until then, which it
	// replaces; empty once it has.
	adopt map[int]*group
	// done ends when the group is stopped.
	done    context.Context
	stop    context.CancelFunc
	started time.Time
}

func newHeldSets(dyn dynamic.Interface, partitions int, onNew func(schema.GroupVersionResource, cache.SharedIndexInformer), log *slog.Logger) *heldSets {
	h := &heldSets{
		dyn:      dyn,
		onNew:    onNew,
		settle:   groupSettle,
		log:      log,
		held:     map[int]*group{},
		uses:     map[string][]schema.GroupVersionResource{},
		handlers: map[handlerID]ownedHandler{},
		changed:  make(chan struct{}),
	}
	h.unlabelled = h.newSet(unlabelledSelector(partitions))
	return h
}

// newSet is a set of informers selecting objects with selector, each with
// the owner and orphan indexes, used and followed as every set is.
func (h *heldSets) newSet(selector string) *informerSet {
	s := newInformerSet(h.dyn)
	s.selector, s.onNew, s.source = selector, h.onNew, h.source
	s.indexers = cache.Indexers{ownerIndex: indexByController, orphanIndex: indexOrphans}
	for id, hd := range h.handlers {
		s.addHandler(id, hd.gvr, hd.h)
	}
	for user, gvrs := range h.uses {
		s.use(user, gvrs...)
	}
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

// sets are every set: the groups', oldest first, then the unlabelled one.
func (h *heldSets) sets() []*informerSet {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]*informerSet, 0, len(h.groups)+1)
	for _, g := range h.groups {
		out = append(out, g.set)
	}
	return append(out, h.unlabelled)
}

// hold adds partition n to the next group, made settle after the last
// change; its objects are read from that group's caches (waitHeld). A
// partition released and taken again while its group still watches it is
// read from that group, without a relist.
func (h *heldSets) hold(n int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.held[n]; ok {
		return
	}
	h.held[n] = nil
	for _, g := range h.groups {
		if slices.Contains(g.partitions, n) {
			h.held[n] = g
		}
	}
	h.later()
}

// release gives partition n up. Its group stops at once if it serves no
// other partition held; otherwise those are grouped anew, without n, and
// the group — n's objects still in its caches — stops once the new one
// has filled its caches.
func (h *heldSets) release(n int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.held[n]; !ok {
		return
	}
	delete(h.held, n)
	h.dropUnused()
	h.later()
}

// later makes the next group settle from now. h.mu is held.
func (h *heldSets) later() {
	switch {
	case h.stopped:
	case h.regroup == nil:
		h.regroup = time.AfterFunc(h.settle, h.group)
	default:
		h.regroup.Reset(h.settle)
	}
}

// group makes one group of the partitions held whose objects no group
// serves yet, and of those whose group also watches partitions released
// (it adopts them once filled).
func (h *heldSets) group() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped {
		return
	}
	var partitions []int
	adopt := map[int]*group{}
	for n, g := range h.held {
		switch {
		case h.adopting(n):
		case g == nil:
			partitions = append(partitions, n)
		case h.wasted(g):
			partitions = append(partitions, n)
			adopt[n] = g
		}
	}
	if len(partitions) == 0 {
		return
	}
	slices.Sort(partitions)
	done, stop := context.WithCancel(context.Background())
	g := &group{partitions: partitions, set: h.newSet(partitionSelector(partitions)), adopt: adopt, done: done, stop: stop, started: time.Now()}
	for _, n := range partitions {
		if adopt[n] == nil {
			h.held[n] = g
		}
	}
	h.groups = append(h.groups, g)
	h.notify()
	h.log.Info("caching partitions together", "partitions", partitions, "regrouped", slices.Sorted(maps.Keys(adopt)))
	if len(adopt) > 0 {
		go h.adoptFilled(g)
	}
}

// adopting tells whether a group filling its caches will take over
// partition n. h.mu is held.
func (h *heldSets) adopting(n int) bool {
	for _, g := range h.groups {
		if _, ok := g.adopt[n]; ok {
			return true
		}
	}
	return false
}

// wasted tells whether g, which is not filling to take over partitions,
// watches a partition whose objects it does not serve: one released,
// or taken again and served by another group. h.mu is held.
func (h *heldSets) wasted(g *group) bool {
	if len(g.adopt) > 0 {
		return false
	}
	for _, p := range g.partitions {
		if h.held[p] != g {
			return true
		}
	}
	return false
}

// adoptFilled waits until g's caches of the resources in use are filled,
// then takes over the partitions it adopts that are still held and not
// served by a newer group, and stops the groups it replaces if they serve
// nothing else.
func (h *heldSets) adoptFilled(g *group) {
	filled := func(context.Context) (bool, error) {
		h.mu.Lock()
		gvrs := h.used()
		h.mu.Unlock()
		for _, gvr := range gvrs {
			if _, ok := g.set.synced(gvr); !ok {
				return false, nil
			}
		}
		return true, nil
	}
	if wait.PollUntilContextCancel(g.done, syncPoll, true, filled) != nil {
		return // stopped
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for n, from := range g.adopt {
		if h.toAdopt(n, from) {
			h.held[n] = g
		}
	}
	h.log.Info("partitions regrouped", "partitions", g.partitions, "after", time.Since(g.started).Round(time.Millisecond))
	g.adopt = nil
	h.notify()
	h.dropUnused()
	h.later()
}

// toAdopt tells whether partition n, which a group filling its caches
// adopts from group from, is still to be adopted: held, and served by from
// or by no group yet. h.mu is held.
func (h *heldSets) toAdopt(n int, from *group) bool {
	cur, ok := h.held[n]
	return ok && (cur == from || cur == nil)
}

// dropUnused stops the groups that serve no partition held and will take
// over none. h.mu is held.
func (h *heldSets) dropUnused() {
	h.groups = slices.DeleteFunc(h.groups, func(g *group) bool {
		for _, cur := range h.held {
			if cur == g {
				return false
			}
		}
		for n, from := range g.adopt {
			if h.toAdopt(n, from) {
				return false
			}
		}
		g.stop()
		g.set.stopAll()
		h.log.Info("stopped caching partitions", "partitions", g.partitions)
		return true
	})
}

// notify wakes those waiting for a partition's group. h.mu is held.
func (h *heldSets) notify() {
	close(h.changed)
	h.changed = make(chan struct{})
}

// used are the resources the controllers use. h.mu is held.
func (h *heldSets) used() []schema.GroupVersionResource {
	var gvrs []schema.GroupVersionResource
	for _, used := range h.uses {
		gvrs = append(gvrs, used...)
	}
	slices.SortFunc(gvrs, func(a, b schema.GroupVersionResource) int { return strings.Compare(a.String(), b.String()) })
	return slices.Compact(gvrs)
}

// waitHeld waits until partition n, held, has a group whose caches are
// filled.
func (h *heldSets) waitHeld(ctx context.Context, n int) error {
	for {
		h.mu.Lock()
		g, held := h.held[n]
		changed, gvrs := h.changed, h.used()
		h.mu.Unlock()
		if !held {
			return fmt.Errorf("partition %d is not held", n)
		}
		if g == nil {
			select {
			case <-ctx.Done():
				return fmt.Errorf("partition %d not grouped yet: %w", n, ctx.Err())
			case <-changed:
				continue
			}
		}
		err := waitGroup(ctx, g, gvrs)
		if err == nil || ctx.Err() != nil || g.done.Err() == nil {
			return err
		}
		// g stopped: another group serves n now.
	}
}

// waitGroup waits until g's caches of gvrs are filled, or ctx ends, or g
// stops.
func waitGroup(ctx context.Context, g *group, gvrs []schema.GroupVersionResource) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(g.done, cancel)()
	return g.set.waitSynced(ctx, gvrs...)
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
	for _, g := range h.groups {
		g.set.only(user, gvrs...)
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

// caches are the running caches of gvr: the groups', oldest first — a
// group being replaced holds every object of the partitions it serves,
// its replacement may not yet — then the unlabelled one.
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
	for _, g := range h.groups {
		g.set.addHandler(id, gvr, handler)
	}
}

func (h *heldSets) removeHandler(id handlerID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.handlers, id)
	h.unlabelled.removeHandler(id)
	for _, g := range h.groups {
		g.set.removeHandler(id)
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
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stopped = true
	if h.regroup != nil {
		h.regroup.Stop()
	}
	clear(h.held)
	h.dropUnused()
	h.unlabelled.stopAll()
	h.notify()
}

// Hold adds partition n to those this applier replica holds
// (WithHeldPartitions; otherwise nothing to do): the informers of its
// parents, children and revisions start with those of the partitions
// taken with it, and WaitHeld waits until their caches are filled.
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

// Release stops reading the objects of partition n, which this applier
// replica no longer holds; its informers stop with the last partition
// of their group, or once the group's others are watched without it.
func (r *Registry) Release(n int) {
	if h, ok := r.owned.(*heldSets); ok {
		h.release(n)
	}
}
