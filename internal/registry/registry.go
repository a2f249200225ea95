// Package registry keeps what every component needs to know of the
// registered controllers: for each UniversalController, its parent and child
// resources resolved to GroupVersionResources and Kinds, and the shared
// informers that watch them. One informer serves a resource type however many
// controllers use it, so watches and memory grow with resource types, not
// with controllers.
//
// A watcher shard's registry (WithPartitions) holds two sets of informers:
// those of the controllers' parents, children and revisions, which list and
// watch only the shard's partitions' objects, and those of the objects
// customize hooks relate, of namespaces and of the controller objects,
// which list and watch all of them. Otherwise both are one set. An applier
// replica's registry in a sharded installation (WithHeldPartitions) has
// one set of the former per group of the partitions the replica took
// together, started and regrouped as it takes and gives partitions (Hold,
// Release), and one of the objects in no partition; it reads objects from
// all of them.
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
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"universalcontroller.dev/uc/core"
	"universalcontroller.dev/uc/internal/compact"
	"universalcontroller.dev/uc/internal/recovery"
	"universalcontroller.dev/uc/internal/workloop"
	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// Listener hears about controllers being registered, changed and removed.
// old is nil for a new controller, cur is nil for a removed one.
type Listener func(old, cur *core.Controller)

// Registry tracks UniversalController objects. Run it, then read controllers
// with Get and objects with Lister.
type Registry struct {
	// owned holds the informers of the registered controllers' parents,
	// children and revisions (Informer); related, those of the controller
	// objects, of the objects customize hooks relate and of namespaces
	// (RelatedInformer). They are one set (the same pointer) but in a
	// watcher shard's registry, whose owned informers select its
	// partitions' objects (WithPartitions).
	// In an applier replica's registry (WithHeldPartitions), owned is a
	// set per group of the partitions held.
	owned   ownedInformers
	related *informerSet
	// compactSource makes their informers, if set (WithSource).
	compactSource *compact.Source
	handlers      atomic.Uint64 // the last OnOwned handler's id
	disco         discovery.CachedDiscoveryInterface
	mapper        *restmapper.DeferredDiscoveryRESTMapper
	ucs           cache.SharedIndexInformer
	sources       []source // UniversalControllers first
	queue         workqueue.TypedRateLimitingInterface[string]
	log           *slog.Logger
	status        *statusWriter // nil: this process does not report on UniversalControllers
	schemas       *statusSchemas
	failures      *failures
	selector      labels.Selector // the controller objects this registry serves
	// partitions the watchers are sharded over (WithShardedWatchers); 0 when
	// they are not.
	partitions int
	// parentsOnly: the caches hold no child nor revision (WithParentsOnly).
	parentsOnly bool

	mu          sync.RWMutex
	controllers map[string]*core.Controller
	listeners   []*Listener
	// notifying orders the listeners' calls: a subscriber hears of the
	// controllers registered before it, then of every change, in order.
	notifying sync.Mutex
}

// A source is a resource whose objects register controllers.
type source struct {
	gvr schema.GroupVersionResource
	inf cache.SharedIndexInformer
	// name is the controller name of an object's name.
	name    func(string) string
	resolve resolver
}

// A resolver turns an object into the core.Controller of that name.
type resolver func(u *unstructured.Unstructured, name string) (*core.Controller, error)

// addSource makes the objects of gvr register controllers. Its informer
// is one of the related set, made once the options have chosen the sets.
func (r *Registry) addSource(gvr schema.GroupVersionResource, name func(string) string, resolve resolver) {
	r.sources = append(r.sources, source{gvr: gvr, name: name, resolve: resolve})
}

// oneSet tells whether the owned and related informers are one set.
func (r *Registry) oneSet() bool { return r.owned == ownedInformers(r.related) }

// Option configures a Registry.
type Option func(*Registry)

// WithStatus makes the registry report on every UniversalController: a
// Ready condition in its status, and a Warning Event when it cannot run.
// One role per installation does it.
func WithStatus(dyn dynamic.Interface, events record.EventRecorder) Option {
	return func(r *Registry) { r.status = &statusWriter{dyn: dyn, events: events} }
}

// WithSelector makes the registry serve only the controller objects
// (UniversalControllers, UniversalDecorators, and Metacontroller's with
// WithMetacontrollerAPI) whose labels sel matches, so that two
// installations on one cluster never serve, or report on, each other's
// controllers. An object that stops matching is let go as if deleted.
func WithSelector(sel labels.Selector) Option {
	return func(r *Registry) { r.selector = sel }
}

// WithSource makes the registry's informers of the API server of source,
// which decode objects straight into compact ones (internal/compact),
// rather than dynamic informers of the registry's dynamic client.
func WithSource(source *compact.Source) Option {
	return func(r *Registry) { r.compactSource = source }
}

// WithStatusSchemas makes the registry watch CustomResourceDefinitions for
// the status schemas of parent kinds (core.StatusSchema), which the applier
// writes parents' status against.
func WithStatusSchemas() Option {
	return func(r *Registry) { r.schemas.watch(r.related.dyn) }
}

// WithPartitions makes the registry a watcher shard's: the informers of
// the controllers' parents, children and revisions list and watch only the
// objects whose v1alpha1.LabelPartition is one of held, the API server
// selecting them; those of related objects, of namespaces and of the
// controller objects still list and watch all of them. A parent resource
// that is also another controller's related resource is watched twice,
// once each way.
//
// held must not be empty (WithPartitions panics): a selector cannot select
// no value, and a shard that holds no partition has nothing to watch — its
// caller must not make it. Nor may a partition be negative. A shard's
// registry serves only its watcher: the roles that read every parent (the
// dispatcher's report of failing parents, WithStatus) need an
// unpartitioned one.
func WithPartitions(held []int) Option {
	sel := partitionSelector(held)
	return func(r *Registry) {
		owned := newInformerSet(r.related.dyn)
		owned.selector = sel
		r.owned = owned
	}
}

// WithShardedWatchers tells the registry that the installation's watchers
// are sharded over that many partitions: each controller it registers
// carries it (core.Controller.Partitions), so that uc labels parents,
// children and revisions with their partition. Every role's registry of
// such an installation needs it.
func WithShardedWatchers(partitions int) Option {
	return func(r *Registry) { r.partitions = partitions }
}

// WithParentsOnly makes the registry cache the controllers' parents and
// nothing they own: the registry of a process that is only a dispatcher,
// which reports on controllers and their failing parents (WithStatus) and
// reads no child or revision — at 50,000 parents × 5 children, its caches
// of the children were 300,000 objects held for nothing. A child resource
// the API server refuses to list still makes the controller's Ready
// condition say so: the registry lists one object of each.
func WithParentsOnly() Option {
	return func(r *Registry) { r.parentsOnly = true }
}

// partitionSelector is the label selector of the objects of the partitions
// held: "universalcontroller.dev/partition in (1,3)"; it panics when held is
// empty or holds a negative partition.
func partitionSelector(held []int) string {
	if len(held) == 0 {
		panic("registry.WithPartitions: no partition held; a watcher shard that holds none has nothing to watch")
	}
	values := make([]string, 0, len(held))
	for _, n := range slices.Compact(slices.Sorted(slices.Values(held))) {
		if n < 0 {
			panic(fmt.Sprintf("registry.WithPartitions: partition %d is negative", n))
		}
		values = append(values, strconv.Itoa(n))
	}
	req, err := labels.NewRequirement(v1alpha1.LabelPartition, selection.In, values)
	if err != nil {
		panic(fmt.Sprintf("registry.WithPartitions: %v", err))
	}
	return labels.NewSelector().Add(*req).String()
}

// New makes a registry that watches UniversalControllers and everything they
// name with the dynamic client.
func New(dyn dynamic.Interface, disco discovery.DiscoveryInterface, log *slog.Logger, opts ...Option) *Registry {
	cached := memory.NewMemCacheClient(disco)
	// A controller whose CRDs are missing is retried within seconds of
	// their creation.
	limiter := workqueue.NewTypedItemExponentialFailureRateLimiter[string](500*time.Millisecond, 5*time.Second)
	r := &Registry{
		related:     newInformerSet(dyn),
		disco:       cached,
		mapper:      restmapper.NewDeferredDiscoveryRESTMapper(cached),
		queue:       workqueue.NewTypedRateLimitingQueueWithConfig(limiter, workqueue.TypedRateLimitingQueueConfig[string]{Name: "universalcontrollers"}),
		log:         log.With("component", "registry"),
		controllers: map[string]*core.Controller{},
		selector:    labels.Everything(),
	}
	r.owned = r.related
	r.schemas, r.failures = newStatusSchemas(r.log), newFailures()
	r.addSource(v1alpha1.Resource, func(n string) string { return n }, r.resolve)
	r.addSource(v1alpha1.DecoratorResource, bus.DecoratorController, r.resolveDecorator)
	for _, opt := range opts {
		opt(r)
	}
	r.related.source = r.compactSource
	switch owned := r.owned.(type) {
	case *informerSet:
		owned.source = r.compactSource
		// The parents' failures are tallied from the owned informers
		// (with one set, every informer, the sources' too; an applier
		// replica's sets have it already).
		owned.onNew = r.watchFailures
	case *heldSets:
		owned.useSource(r.compactSource)
	}
	for i := range r.sources {
		r.sources[i].inf = r.related.get(r.sources[i].gvr)
	}
	r.ucs = r.sources[0].inf
	// The queue holds controller names: a decorator's is
	// bus.DecoratorController(name), and so on.
	for i, src := range r.sources {
		enqueue := func(obj any) {
			if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
				r.queue.Add(src.name(key))
				if i == 0 {
					// A UniversalController's status may have been
					// written: its failing parents' count is checked.
					r.reportSoon(key)
				}
			}
		}
		_, _ = src.inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    enqueue,
			UpdateFunc: func(_, obj any) { enqueue(obj) },
			DeleteFunc: enqueue,
		})
	}
	return r
}

// objects returns the source of the objects registering a controller of
// that name, and the object's name. Every source but UniversalControllers
// names its controllers with a prefix holding "=", which no object's name
// has.
func (r *Registry) objects(controller string) (*source, string) {
	for i := range r.sources[1:] {
		src := &r.sources[i+1]
		if name, ok := strings.CutPrefix(controller, src.name("")); ok {
			return src, name
		}
	}
	return &r.sources[0], controller
}

// registryUser uses the informers of the sources; upper case, it is never
// a controller's name.
const registryUser = "UniversalControllers"

// Subscribe adds a listener: it hears at once of every controller
// registered so far (as registered: old nil), then of every change. The
// function it returns removes it.
func (r *Registry) Subscribe(l Listener) (unsubscribe func()) {
	r.notifying.Lock()
	defer r.notifying.Unlock()
	sub := &l
	r.mu.Lock()
	r.listeners = append(r.listeners, sub)
	registered := slices.Collect(maps.Values(r.controllers))
	r.mu.Unlock()
	for _, c := range registered {
		l(nil, c)
	}
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.listeners = slices.DeleteFunc(r.listeners, func(s *Listener) bool { return s == sub })
	}
}

// Get returns the registered controller of that name.
func (r *Registry) Get(name string) (*core.Controller, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	c, ok := r.controllers[name]
	return c, ok
}

// MayExist tells whether a controller of that name exists, whether or not
// it is registered yet; before the registry has listed them all, any name
// may.
func (r *Registry) MayExist(name string) bool {
	src, key := r.objects(name)
	if !src.inf.HasSynced() {
		return true
	}
	obj, exists, err := src.inf.GetIndexer().GetByKey(key)
	return err == nil && exists && r.selects(obj)
}

// selects tells whether the registry serves the controller object obj.
func (r *Registry) selects(obj any) bool {
	m, ok := compact.Meta(obj)
	return ok && r.selector.Matches(labels.Set(m.GetLabels()))
}

// Informer returns the shared informer of a resource of controllers'
// parents, children or revisions (in a watcher shard's registry, it holds
// the shard's partitions' objects only). An applier replica's registry
// (WithHeldPartitions) has several: Informer panics; follow them with
// OnOwned.
func (r *Registry) Informer(gvr schema.GroupVersionResource) cache.SharedIndexInformer {
	owned, ok := r.owned.(*informerSet)
	if !ok {
		panic("registry: an applier replica's registry (WithHeldPartitions) has informers of " + gvr.Resource + " per group of partitions held; use OnOwned")
	}
	return owned.get(gvr)
}

// OnOwned adds handler to the informers of a resource of controllers'
// parents, children or revisions: in an applier replica's registry, to
// those of every group of partitions it holds and of the objects in none,
// and to those of the groups it makes later, of partitions taken or
// regrouped (whose objects it hears of as added). It returns what
// removes it.
func (r *Registry) OnOwned(gvr schema.GroupVersionResource, handler cache.ResourceEventHandler) (remove func()) {
	id := handlerID(r.handlers.Add(1))
	r.owned.addHandler(id, gvr, handler)
	return func() { r.owned.removeHandler(id) }
}

// EachOwned calls fn with the metadata of every cached object of a
// resource of controllers' parents, children or revisions. fn must not
// change it.
func (r *Registry) EachOwned(gvr schema.GroupVersionResource, fn func(metav1.Object)) {
	for _, c := range r.owned.caches(gvr) {
		for _, obj := range c.List() {
			if m, ok := compact.Meta(obj); ok {
				fn(m)
			}
		}
	}
}

// RelatedInformer returns the shared informer of a resource customize
// hooks relate, or of namespaces, which Watch starts: it holds every
// object of the resource, whatever the partitions the registry holds.
func (r *Registry) RelatedInformer(gvr schema.GroupVersionResource) cache.SharedIndexInformer {
	return r.related.get(gvr)
}

// List returns the objects of a resource of controllers' parents, children
// or revisions that sel selects from its shared cache (Informer's), in
// namespace, or in every namespace when namespace is "". Each is decoded
// anew: the caller may change it.
func (r *Registry) List(gvr schema.GroupVersionResource, namespace string, sel labels.Selector) ([]*unstructured.Unstructured, error) {
	objs, err := list(r.Informer(gvr).GetIndexer(), namespace, sel)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", gvr.Resource, err)
	}
	return objs, nil
}

// ListRelated is List from the cache of a resource customize hooks relate
// (RelatedInformer's). It fails unless that cache is watched and filled
// (Watch): an empty cache must never pass for a resource without objects.
func (r *Registry) ListRelated(gvr schema.GroupVersionResource, namespace string, sel labels.Selector) ([]*unstructured.Unstructured, error) {
	c, ok := r.related.synced(gvr)
	if !ok {
		return nil, fmt.Errorf("list %s: its cache is not watched", gvr.Resource)
	}
	objs, err := list(c, namespace, sel)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", gvr.Resource, err)
	}
	return objs, nil
}

// Watching tells whether the related resources gvrs are watched for
// controller (Watch) and their caches filled. A new registration of the
// controller (a new generation of its object) lets go of them.
func (r *Registry) Watching(controller string, gvrs ...schema.GroupVersionResource) bool {
	return r.related.watching(controller, gvrs...)
}

// list lists the objects of a cache that sel selects, in namespace or, for
// "", in all, decoded. (The dynamic informers' listers cannot: they take
// every cached object for an unstructured one.)
func list(c cache.Indexer, namespace string, sel labels.Selector) ([]*unstructured.Unstructured, error) {
	var objs []any
	add := func(o any) { objs = append(objs, o) }
	var err error
	if namespace == "" {
		err = cache.ListAll(c, sel, add)
	} else {
		err = cache.ListAllByNamespace(c, namespace, sel, add)
	}
	if err != nil {
		return nil, err
	}
	return decodeAll(objs, compact.Decode)
}

// decodeAll decodes objects of a shared cache with decode (compact.Decode,
// or compact.DecodeEncoded for objects to be encoded).
func decodeAll[T any](objs []T, decode func(any) (*unstructured.Unstructured, error)) ([]*unstructured.Unstructured, error) {
	out := make([]*unstructured.Unstructured, 0, len(objs))
	for _, o := range objs {
		u, err := decode(o)
		if err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, nil
}

// LastSyncResourceVersion is the resourceVersion the informer of gvr last
// heard: its list's, or its latest watch event's.
func (r *Registry) LastSyncResourceVersion(gvr schema.GroupVersionResource) string {
	return r.Informer(gvr).LastSyncResourceVersion()
}

// Run processes UniversalController changes until ctx ends.
func (r *Registry) Run(ctx context.Context) {
	// A watcher shard's registry lasts one term: its informers end with it.
	defer r.related.stopAll()
	defer r.owned.stopAll()
	defer r.queue.ShutDown()
	defer r.failures.queue.ShutDown()
	for _, src := range r.sources {
		r.related.use(registryUser, src.gvr)
	}
	defer r.related.only(registryUser)
	if !cache.WaitForCacheSync(ctx.Done(), r.ucs.HasSynced) {
		return
	}
	// Parents' status schemas before their controllers, so that their
	// first status is written against them.
	r.schemas.run(ctx, 30*time.Second)
	workloop.Loop[string]{
		Component: recovery.Registry,
		Timeout:   syncTimeout,
		Sync:      r.sync,
		Failed: func(name string, err error) {
			r.log.Error("register controller", "controller", name, "err", err)
		},
		Log:     r.log,
		LogArgs: func(name string) []any { return []any{"controller", name} },
	}.Run(ctx, r.queue, 1)
	go r.reportFailures(ctx)
	<-ctx.Done()
}

// syncTimeout bounds the registration of one controller: its informers
// sync within a minute (see Watch), or the registration fails and is
// retried.
const syncTimeout = 2 * time.Minute

// sync makes the registered controller of that name match its object.
func (r *Registry) sync(ctx context.Context, name string) error {
	src, key := r.objects(name)
	obj, exists, err := src.inf.GetIndexer().GetByKey(key)
	if err != nil {
		return err
	}
	old, _ := r.Get(name)
	if !exists || !r.selects(obj) {
		r.set(name, old, nil)
		r.only(name)
		return nil
	}
	u, err := compact.Decode(obj)
	if err != nil {
		return err
	}
	if old != nil && old.Generation == u.GetGeneration() {
		return nil
	}
	cur, err := src.resolve(u, name)
	if err == nil {
		cur.Partitions = r.partitions
		err = r.startInformers(ctx, cur)
	}
	if err != nil {
		r.set(name, old, nil) // a spec that cannot run stops the old one
		r.only(name)
		if serr := r.status.report(ctx, u, err); serr != nil {
			r.log.Error("report", "controller", name, "err", serr)
		}
		return err
	}
	r.set(name, old, cur)
	if err := r.status.report(ctx, u, nil); err != nil {
		r.log.Error("report", "controller", name, "err", err)
	}
	return nil
}

func (r *Registry) set(name string, old, cur *core.Controller) {
	if old == nil && cur == nil {
		return
	}
	r.notifying.Lock()
	defer r.notifying.Unlock()
	r.mu.Lock()
	if cur == nil {
		delete(r.controllers, name)
		r.failures.forget(name)
		r.log.Info("controller removed", "controller", name)
	} else {
		r.controllers[name] = cur
		r.reportSoon(name) // "none failing" too
		r.log.Info("controller registered", "controller", name, "parents", cur.ParentResources(), "generation", cur.Generation)
	}
	listeners := r.listeners
	r.mu.Unlock()
	for _, l := range listeners {
		(*l)(old, cur)
	}
}

// resolve turns a UniversalController object into a core.Controller, its
// resources resolved through discovery. Its parent resource must have a
// status subresource.
func (r *Registry) resolve(u *unstructured.Unstructured, name string) (*core.Controller, error) {
	c, err := core.NewController(u, name, r.Resolve)
	if err != nil {
		return nil, err
	}
	if err := r.hasStatus(c.Parent); err != nil {
		return nil, err
	}
	return c, nil
}

// Resolve resolves an apiVersion and plural resource name through
// discovery (see ResolveResource).
func (r *Registry) Resolve(rule v1alpha1.ResourceRule) (core.Resource, error) {
	return ResolveResource(r.mapper, rule)
}

// ResolveResource resolves an apiVersion and plural resource name with
// mapper, resetting it once when the resource is not known yet (its CRD
// may be new).
func ResolveResource(mapper meta.ResettableRESTMapper, rule v1alpha1.ResourceRule) (core.Resource, error) {
	res, err := core.ResolveWith(mapper, rule)
	if meta.IsNoMatchError(err) {
		mapper.Reset()
		res, err = core.ResolveWith(mapper, rule)
	}
	return res, err
}

// hasStatus checks that a parent resource has a status subresource, where
// uc writes the hook's status.
func (r *Registry) hasStatus(res core.Resource) error {
	has, err := r.statusSubresource(res)
	if err == nil && !has {
		err = fmt.Errorf("parent resource %s has no status subresource; add `subresources: {status: {}}` to its CRD", res.GVR.GroupResource())
	}
	return err
}

// statusSubresource tells whether a resource has a status subresource.
func (r *Registry) statusSubresource(res core.Resource) (bool, error) {
	list, err := r.disco.ServerResourcesForGroupVersion(res.GVR.GroupVersion().String())
	if err != nil {
		return false, fmt.Errorf("discover %s: %w", res.GVR.GroupVersion(), err)
	}
	return slices.ContainsFunc(list.APIResources, func(api metav1.APIResource) bool {
		return api.Name == res.GVR.Resource+"/status"
	}), nil
}

// Watch starts the shared informer of a resource that controller uses
// besides its parent and children (its related objects), if it is not
// running, and waits until its cache is filled. Read it with
// RelatedInformer and ListRelated.
func (r *Registry) Watch(ctx context.Context, controller string, gvr schema.GroupVersionResource) error {
	r.related.use(controller, gvr)
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := r.related.waitSynced(ctx, gvr); err != nil {
		return fmt.Errorf("watch %s: %w", gvr, err)
	}
	return nil
}

// ownerIndex indexes child objects by the UID of their controller owner.
const ownerIndex = "uc-controller-uid"

func indexByController(obj any) ([]string, error) {
	o, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	if ref := metav1.GetControllerOfNoCopy(o); ref != nil {
		return []string{string(ref.UID)}, nil
	}
	return nil, nil
}

// orphanIndex indexes child objects that no controller owns by namespace,
// and every one of them under allNamespaces, so claiming orphans costs the
// number of orphans, not the number of objects of the kind.
const (
	orphanIndex   = "uc-orphans"
	allNamespaces = "\x00all"
)

func indexOrphans(obj any) ([]string, error) {
	o, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	if metav1.GetControllerOfNoCopy(o) != nil {
		return nil, nil
	}
	return []string{o.GetNamespace(), allNamespaces}, nil
}

// Orphans lists the objects of a child resource that no controller owns
// and sel selects, in namespace, or in every namespace when namespace is
// "". Only those are decoded: a namespace's orphans are mostly no
// parent's (its kube-root-ca.crt ConfigMap, say), and every sync looks.
func (r *Registry) Orphans(gvr schema.GroupVersionResource, namespace string, sel labels.Selector) ([]*unstructured.Unstructured, error) {
	return r.orphans(gvr, namespace, sel, compact.Decode)
}

func (r *Registry) orphans(gvr schema.GroupVersionResource, namespace string, sel labels.Selector, decode func(any) (*unstructured.Unstructured, error)) ([]*unstructured.Unstructured, error) {
	key := namespace
	if key == "" {
		key = allNamespaces
	}
	objs, err := r.byIndex(gvr, orphanIndex, key)
	if err != nil {
		return nil, fmt.Errorf("list orphan %s: %w", gvr.Resource, err)
	}
	objs = slices.DeleteFunc(objs, func(o any) bool {
		m, ok := compact.Meta(o)
		return !ok || !sel.Matches(labels.Set(m.GetLabels()))
	})
	return inNamespace(objs, namespace, decode)
}

// Owned lists the objects of a child resource whose controller is owner, in
// namespace (the owner's), or in every namespace when namespace is "". An
// object elsewhere that names a namespaced owner is not its child — the
// garbage collector does not honour such a reference either — and uc must
// not act on it: whoever could write it there would steer uc's writes into
// a namespace the parent has no say in.
func (r *Registry) Owned(gvr schema.GroupVersionResource, namespace string, owner types.UID) ([]*unstructured.Unstructured, error) {
	return r.ownedBy(gvr, namespace, owner, compact.Decode)
}

func (r *Registry) ownedBy(gvr schema.GroupVersionResource, namespace string, owner types.UID, decode func(any) (*unstructured.Unstructured, error)) ([]*unstructured.Unstructured, error) {
	objs, err := r.byIndex(gvr, ownerIndex, string(owner))
	if err != nil {
		return nil, fmt.Errorf("list %s owned by %s: %w", gvr.Resource, owner, err)
	}
	return inNamespace(objs, namespace, decode)
}

// ForRequests is the Cache a hook request's children and attachments are
// read from: the registry's, its objects to be encoded
// (compact.Object.Encoded) — their metadata readable, the rest of each its
// cached JSON, not decoded — which is all a request needs of them.
func (r *Registry) ForRequests() core.Cache { return forRequests{r} }

type forRequests struct{ r *Registry }

func (v forRequests) Owned(gvr schema.GroupVersionResource, namespace string, owner types.UID) ([]*unstructured.Unstructured, error) {
	return v.r.ownedBy(gvr, namespace, owner, compact.DecodeEncoded)
}

func (v forRequests) Orphans(gvr schema.GroupVersionResource, namespace string, sel labels.Selector) ([]*unstructured.Unstructured, error) {
	return v.r.orphans(gvr, namespace, sel, compact.DecodeEncoded)
}

func (v forRequests) Object(gvr schema.GroupVersionResource, namespace, name string) (*unstructured.Unstructured, error) {
	return v.r.object(gvr, namespace, name, compact.DecodeEncoded)
}

// byIndex lists the cached objects of gvr that an index files under key,
// from every cache of the resource; an object that two caches hold (it is
// moving from one partition to another) once.
func (r *Registry) byIndex(gvr schema.GroupVersionResource, index, key string) ([]any, error) {
	caches := r.owned.caches(gvr)
	if len(caches) == 1 {
		return caches[0].ByIndex(index, key)
	}
	var out []any
	seen := map[string]bool{}
	for _, c := range caches {
		objs, err := c.ByIndex(index, key)
		if err != nil {
			return nil, err
		}
		for _, o := range objs {
			if k, err := cache.MetaNamespaceKeyFunc(o); err == nil && !seen[k] {
				seen[k] = true
				out = append(out, o)
			}
		}
	}
	return out, nil
}

// inNamespace are the objects in namespace, or all of them when namespace
// is "", decoded.
func inNamespace(objs []any, namespace string, decode func(any) (*unstructured.Unstructured, error)) ([]*unstructured.Unstructured, error) {
	if namespace != "" {
		objs = slices.DeleteFunc(objs, func(o any) bool {
			m, ok := compact.Meta(o)
			return !ok || m.GetNamespace() != namespace
		})
	}
	return decodeAll(objs, decode)
}

// startInformers starts the informers a controller needs and waits until
// their caches are filled, so nothing acts on a partial view.
func (r *Registry) startInformers(ctx context.Context, c *core.Controller) error {
	var owned []schema.GroupVersionResource
	for _, ch := range c.Children {
		owned = append(owned, ch.GVR)
	}
	if c.Rolling() {
		// A parent's revisions are its owned objects, like its children.
		owned = append(owned, v1alpha1.RevisionResource)
	}
	if r.parentsOnly {
		if err := r.mayList(ctx, owned); err != nil {
			return fmt.Errorf("controller %s: %w", c.Name, err)
		}
		owned = nil
	}
	for _, gvr := range owned {
		if err := r.owned.index(gvr, cache.Indexers{ownerIndex: indexByController, orphanIndex: indexOrphans}); err != nil {
			return fmt.Errorf("index %s: %w", gvr.Resource, err)
		}
	}
	gvrs := append(c.ParentResources(), owned...)
	r.only(c.Name, gvrs...)
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := r.owned.waitSynced(ctx, gvrs...); err != nil {
		return fmt.Errorf("controller %s: %w", c.Name, err)
	}
	return nil
}

// mayList lists one object of each resource, in every namespace, as an
// informer of it would list them all: an error if the API server refuses.
func (r *Registry) mayList(ctx context.Context, gvrs []schema.GroupVersionResource) error {
	for _, gvr := range gvrs {
		if _, err := r.related.dyn.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
			if apierrors.IsForbidden(err) {
				return forbidden(gvr, err)
			}
			return fmt.Errorf("list %s: %w", gvr.Resource, err)
		}
	}
	return nil
}

// only makes controller use exactly owned of the owned informers (none:
// the controller is gone), and none of the related ones: Watch starts
// those as its customize hook's replies name them. With one set of
// informers, the related resources that are not owned ones are let go
// likewise.
func (r *Registry) only(controller string, owned ...schema.GroupVersionResource) {
	r.owned.only(controller, owned...)
	if !r.oneSet() {
		r.related.only(controller)
	}
}

// Object returns an object from the shared cache of its resource, decoded
// anew (the caller may change it); namespace is "" for a cluster-scoped
// object.
func (r *Registry) Object(gvr schema.GroupVersionResource, namespace, name string) (*unstructured.Unstructured, error) {
	return r.object(gvr, namespace, name, compact.Decode)
}

func (r *Registry) object(gvr schema.GroupVersionResource, namespace, name string, decode func(any) (*unstructured.Unstructured, error)) (*unstructured.Unstructured, error) {
	obj, err := r.cached(gvr, namespace, name)
	if err != nil {
		return nil, err
	}
	return decode(obj)
}

// Meta returns the metadata of an object in the shared cache of its
// resource, without decoding the rest of it; namespace is "" for a
// cluster-scoped object. The caller must not change it.
func (r *Registry) Meta(gvr schema.GroupVersionResource, namespace, name string) (metav1.Object, error) {
	obj, err := r.cached(gvr, namespace, name)
	if err != nil {
		return nil, err
	}
	m, ok := compact.Meta(obj)
	if !ok {
		return nil, fmt.Errorf("%s %s/%s: cached a %T", gvr.Resource, namespace, name, obj)
	}
	return m, nil
}

// cached is an object as the shared cache of its resource holds it, or a
// NotFound error.
func (r *Registry) cached(gvr schema.GroupVersionResource, namespace, name string) (any, error) {
	key := name
	if namespace != "" {
		key = namespace + "/" + name
	}
	for _, c := range r.owned.caches(gvr) {
		obj, exists, err := c.GetByKey(key)
		if err != nil {
			return nil, err
		}
		if exists {
			return obj, nil
		}
	}
	return nil, apierrors.NewNotFound(gvr.GroupResource(), name)
}
