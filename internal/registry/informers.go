package registry

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"universalcontroller.dev/uc/internal/compact"
)

// informerSet holds one shared informer per resource type. An informer runs
// while at least one user (a controller, by name) uses its resource, and
// stops when the last one stops using it, so watches follow the resource
// types in use, not the number of controllers.
type informerSet struct {
	dyn dynamic.Interface
	// source, when set, makes the informers (WithSource): they decode the
	// apiserver's JSON straight into compact objects. Otherwise they are
	// dynamic informers of dyn, whose objects Transform makes compact.
	source *compact.Source
	// selector, when set, is the label selector its informers list and
	// watch with: the API server sends only the objects it selects.
	selector string
	// onNew, when set, is called with each informer as it is made, before
	// it starts.
	onNew func(schema.GroupVersionResource, cache.SharedIndexInformer)
	// indexers, when set, are indexes each informer has from when it is
	// made (besides the namespace index).
	indexers cache.Indexers

	mu    sync.Mutex
	byGVR map[schema.GroupVersionResource]*sharedInformer
	// stopped says stopAll was called: the set makes no more informers.
	stopped bool
	// handlers follow the informers of their resource: those running and
	// those made later (addHandler).
	handlers map[handlerID]ownedHandler
}

// handlerID names an event handler added to the informers of a resource
// in one or more sets (Registry.OnOwned).
type handlerID uint64

type ownedHandler struct {
	gvr schema.GroupVersionResource
	h   cache.ResourceEventHandler
}

type sharedInformer struct {
	// informer's cache holds compact objects (internal/compact): client-go's
	// dynamic listers, which take them for unstructured ones, cannot read it.
	informer cache.SharedIndexInformer
	users    map[string]bool
	stop     chan struct{} // nil until started
	// handlers are the registrations of the set's handlers on informer.
	handlers map[handlerID]cache.ResourceEventHandlerRegistration

	mu        sync.Mutex
	forbidden error // set while the API server refuses to list or watch the resource
}

func newInformerSet(dyn dynamic.Interface) *informerSet {
	return &informerSet{dyn: dyn, byGVR: map[schema.GroupVersionResource]*sharedInformer{}, handlers: map[handlerID]ownedHandler{}}
}

// get returns the informer of a resource, making it (not started) if needed.
func (s *informerSet) get(gvr schema.GroupVersionResource) cache.SharedIndexInformer {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.entry(gvr).informer
}

func (s *informerSet) entry(gvr schema.GroupVersionResource) *sharedInformer {
	e := s.byGVR[gvr]
	if e == nil {
		var tweak dynamicinformer.TweakListOptionsFunc
		if sel := s.selector; sel != "" {
			tweak = func(o *metav1.ListOptions) { o.LabelSelector = sel }
		}
		indexers := cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}
		maps.Copy(indexers, s.indexers)
		e = &sharedInformer{users: map[string]bool{}, handlers: map[handlerID]cache.ResourceEventHandlerRegistration{}}
		if s.source != nil {
			e.informer = s.source.Informer(gvr, tweak, indexers)
		} else {
			e.informer = dynamicinformer.NewFilteredDynamicInformer(s.dyn, gvr, metav1.NamespaceAll, 0, indexers, tweak).Informer()
		}
		// Not started yet, so setting the handlers cannot fail.
		_ = e.informer.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
			e.setForbidden(gvr, err)
			cache.DefaultWatchErrorHandler(ctx, r, err)
		})
		_ = e.informer.SetTransform(compact.Transform)
		if s.onNew != nil {
			s.onNew(gvr, e.informer)
		}
		for id, h := range s.handlers {
			if h.gvr == gvr {
				e.register(id, h.h)
			}
		}
		s.byGVR[gvr] = e
	}
	return e
}

// register adds the set's handler id to the informer.
func (e *sharedInformer) register(id handlerID, h cache.ResourceEventHandler) {
	// The informer is not stopped (a stopped one leaves the set), so
	// adding a handler cannot fail.
	if reg, err := e.informer.AddEventHandler(h); err == nil {
		e.handlers[id] = reg
	}
}

// addHandler adds h to the informer of gvr, running or not, and to the
// informers of gvr made later, until removeHandler(id).
func (s *informerSet) addHandler(id handlerID, gvr schema.GroupVersionResource, h cache.ResourceEventHandler) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.handlers[id] = ownedHandler{gvr: gvr, h: h}
	if e := s.byGVR[gvr]; e != nil {
		e.register(id, h)
	}
}

// removeHandler removes the handler id from the set's informers.
func (s *informerSet) removeHandler(id handlerID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.handlers, id)
	for _, e := range s.byGVR {
		if reg, ok := e.handlers[id]; ok {
			_ = e.informer.RemoveEventHandler(reg)
			delete(e.handlers, id)
		}
	}
}

// caches are the caches of gvr's informers: the set's one, made if
// needed.
func (s *informerSet) caches(gvr schema.GroupVersionResource) []cache.Indexer {
	return []cache.Indexer{s.get(gvr).GetIndexer()}
}

// index adds the indexers the informer of gvr lacks; it must not have
// started.
func (s *informerSet) index(gvr schema.GroupVersionResource, indexers cache.Indexers) error {
	inf := s.get(gvr)
	missing := cache.Indexers{}
	for name, fn := range indexers {
		if _, ok := inf.GetIndexer().GetIndexers()[name]; !ok {
			missing[name] = fn
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return inf.AddIndexers(missing)
}

// running is the cache of gvr's informer if the set runs one.
func (s *informerSet) running(gvr schema.GroupVersionResource) (cache.Indexer, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.byGVR[gvr]
	if e == nil || e.stop == nil {
		return nil, false
	}
	return e.informer.GetIndexer(), true
}

// synced returns the cache of a resource whose informer runs and has
// filled it; false, without making one, when there is none.
func (s *informerSet) synced(gvr schema.GroupVersionResource) (cache.Indexer, bool) {
	s.mu.Lock()
	e := s.byGVR[gvr]
	running := e != nil && e.stop != nil
	s.mu.Unlock()
	if !running || !e.informer.HasSynced() {
		return nil, false
	}
	return e.informer.GetIndexer(), true
}

// watching tells whether user uses every one of gvrs and their informers
// run with their caches filled.
func (s *informerSet) watching(user string, gvrs ...schema.GroupVersionResource) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, gvr := range gvrs {
		e := s.byGVR[gvr]
		if e == nil || !e.users[user] || e.stop == nil || !e.informer.HasSynced() {
			return false
		}
	}
	return true
}

// use adds resources to what user uses, starting their informers.
func (s *informerSet) use(user string, gvrs ...schema.GroupVersionResource) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, gvr := range gvrs {
		e := s.entry(gvr)
		e.users[user] = true
		if e.stop == nil {
			e.stop = make(chan struct{})
			go e.informer.Run(e.stop)
		}
	}
}

// only makes user use exactly gvrs (none: user is gone), stopping the
// informers nobody uses any more.
func (s *informerSet) only(user string, gvrs ...schema.GroupVersionResource) {
	s.use(user, gvrs...)
	keep := map[schema.GroupVersionResource]bool{}
	for _, gvr := range gvrs {
		keep[gvr] = true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for gvr, e := range s.byGVR {
		if keep[gvr] || !e.users[user] {
			continue
		}
		delete(e.users, user)
		if len(e.users) == 0 && e.stop != nil {
			close(e.stop)
			delete(s.byGVR, gvr)
		}
	}
}

// stopAll stops every informer of the set.
func (s *informerSet) stopAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopped = true
	for gvr, e := range s.byGVR {
		if e.stop != nil {
			close(e.stop)
		}
		delete(s.byGVR, gvr)
	}
}

// errSetStopped is waitSynced's error on a stopped set.
var errSetStopped = errors.New("caches stopped")

// setForbidden records whether err, the last error listing or watching
// gvr, is the API server's refusal. A later error that is not clears it;
// a successful list does not call the handler, and the cache syncs.
func (e *sharedInformer) setForbidden(gvr schema.GroupVersionResource, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.forbidden = nil
	if apierrors.IsForbidden(err) {
		e.forbidden = forbidden(gvr, err)
	}
}

// forbidden is the error of the API server's refusal err to list gvr,
// naming the permission uc lacks.
func forbidden(gvr schema.GroupVersionResource, err error) error {
	gr := gvr.GroupResource().String()
	return fmt.Errorf("cannot list %s in the cluster: forbidden (uc's ServiceAccount needs list and watch on %s): %w", gr, gr, err)
}

func (e *sharedInformer) refusal() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.forbidden
}

// syncPoll is how often waitSynced looks at the caches.
const syncPoll = 100 * time.Millisecond

// waitSynced waits until the caches of gvrs are filled. It fails at once
// when the API server refuses to list one of them, with an error that
// names the permission uc lacks, when ctx ends, and when the set is
// stopped.
func (s *informerSet) waitSynced(ctx context.Context, gvrs ...schema.GroupVersionResource) error {
	tick := time.NewTicker(syncPoll)
	defer tick.Stop()
	for {
		synced := true
		for _, gvr := range gvrs {
			s.mu.Lock()
			if s.stopped {
				s.mu.Unlock()
				return fmt.Errorf("caches of %v: %w", gvrs, errSetStopped)
			}
			e := s.entry(gvr)
			s.mu.Unlock()
			if e.informer.HasSynced() {
				continue
			}
			if err := e.refusal(); err != nil {
				return err
			}
			synced = false
		}
		if synced {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("caches of %v not filled: %w", gvrs, ctx.Err())
		case <-tick.C:
		}
	}
}

// cached counts the objects in the caches of the running informers.
func (s *informerSet) cached() map[schema.GroupVersionResource]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[schema.GroupVersionResource]int{}
	for gvr, e := range s.byGVR {
		if e.stop != nil {
			out[gvr] = len(e.informer.GetIndexer().ListKeys())
		}
	}
	return out
}

// unsynced lists the running informers whose caches are not filled, each
// with why if the API server refuses it.
func (s *informerSet) unsynced() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for gvr, e := range s.byGVR {
		if e.stop == nil || e.informer.HasSynced() {
			continue
		}
		if err := e.refusal(); err != nil {
			out = append(out, err.Error())
		} else {
			out = append(out, gvr.String()+": cache not filled yet")
		}
	}
	slices.Sort(out)
	return out
}

// Unsynced lists what keeps the registry's view incomplete: the caches of
// UniversalControllers, of UniversalDecorators and of the resources
// registered controllers use (their parents, children and related
// objects) that are not filled yet. Empty, every cache is filled.
func (r *Registry) Unsynced() []string {
	if !r.ucs.HasSynced() { // the other caches start after it
		return []string{"UniversalControllers: cache not filled yet"}
	}
	out := r.owned.unsynced()
	if !r.oneSet() {
		out = append(out, r.related.unsynced()...)
		slices.Sort(out)
		out = slices.Compact(out) // a resource may be both a parent and related
	}
	return out
}

// Cached counts, by resource, the objects the caches of the registered
// controllers' parents, children and revisions hold (those of running
// informers): in a watcher shard's registry (WithPartitions), only its
// partitions' objects. Unpartitioned, the one set of caches also holds
// the controller objects and the objects customize hooks relate.
func (r *Registry) Cached() map[schema.GroupVersionResource]int {
	return r.owned.cached()
}
