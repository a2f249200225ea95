// Package watcher is uc's watch core. It follows the parents and children of
// every registered controller through the registry's shared informers, maps
// each change to the parent it concerns, coalesces changes per parent in a
// rate-limited workqueue, and publishes one hook request per parent, carrying
// the full observed state, to JetStream.
package watcher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/time/rate"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"universalcontroller.dev/uc/core"
	"universalcontroller.dev/uc/internal/recovery"
	"universalcontroller.dev/uc/internal/registry"
	"universalcontroller.dev/uc/internal/topology"
	"universalcontroller.dev/uc/internal/tracing"
	"universalcontroller.dev/uc/internal/verdict"
	"universalcontroller.dev/uc/internal/workloop"
	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// Options tune a Watcher.
type Options struct {
	// Partitions is the number of partitions parents are spread over.
	Partitions int
	// Workers is the number of parents synced at once.
	Workers int
	// TracerProvider makes the spans of the syncs (nil: the global one).
	TracerProvider trace.TracerProvider
	// Lease, if set, tells whether this watcher may publish: nil while it
	// holds the watchers' lease, else why not. It is asked right before
	// every publish, so that a leader that was paused or cut off past its
	// lease publishes nothing when it goes on, whatever its goroutines
	// run first.
	Lease func() error
	// Held, for a watcher shard (an installation with sharded watchers),
	// are the partitions it holds: its registry holds only their objects
	// (registry.WithPartitions), it takes their customize replies, and it
	// answers resync requests and questions about their parents only. nil
	// for the one watcher of an installation.
	Held []int
}

// parentKey names one parent of one controller: the watcher's queue has one
// item per parent, so no two workers sync a parent at once. Whether a sync
// is a resync is not in the key but in Watcher.resyncs (see resync.go).
type parentKey struct {
	Controller string
	// Resource is a decorated object's resource (core.Resource.Key);
	// empty for a UniversalController's parent.
	Resource        string
	Namespace, Name string
}

func (k parentKey) String() string {
	if k.Namespace == "" {
		return k.Name
	}
	return k.Namespace + "/" + k.Name
}

// Watcher publishes hook requests for the parents of registered controllers.
type Watcher struct {
	reg       Registry
	js        jetstream.JetStream
	opts      Options
	log       *slog.Logger
	tracer    trace.Tracer
	queue     workqueue.TypedRateLimitingInterface[parentKey]
	customize customizeCache
	republish *republisher
	chain     *requestChain

	mu       sync.Mutex
	handlers map[string][]handler // by controller name

	applying writeWaits      // parents being applied, or whose apply's writes are awaited
	handled  handledVersions // how far the handlers got in each informer
	// resyncs are the parents whose next sync is a resync; laterResyncs,
	// those whose resync is not due yet (see resync.go).
	resyncs      resyncSet
	laterResyncs workqueue.TypedDelayingInterface[parentKey]

	consuming   atomic.Bool // the customize replies are consumed
	unsubscribe func()      // from the registry
}

// Registry is what the watcher needs of the registered controllers and
// the shared informers (internal/registry's Registry).
type Registry interface {
	// Get returns a registered controller; MayExist tells one that the
	// registry may register soon (it has not listed them all yet);
	// Subscribe tells of every one registered, changed or removed.
	Get(name string) (*core.Controller, bool)
	MayExist(name string) bool
	Subscribe(l registry.Listener) (unsubscribe func())
	// Resolve resolves a resource a customize reply names, and Watch makes
	// the shared informers follow it for the controller.
	Resolve(rule v1alpha1.ResourceRule) (core.Resource, error)
	Watch(ctx context.Context, controller string, gvr schema.GroupVersionResource) error
	// Cache holds the parents and children the core reads; ForRequests
	// is the same, its objects held to be encoded in a request (only their
	// metadata may be read: see compact.Object.Encoded).
	core.Cache
	ForRequests() core.Cache
	// Informer is the shared informer of a resource of parents, children
	// or revisions (its cache holds compact objects, see internal/compact;
	// a watcher shard's, only its partitions' objects); List lists its
	// objects, decoded; LastSyncResourceVersion is the last resourceVersion
	// it heard.
	Informer(gvr schema.GroupVersionResource) cache.SharedIndexInformer
	List(gvr schema.GroupVersionResource, namespace string, sel labels.Selector) ([]*unstructured.Unstructured, error)
	// RelatedInformer and ListRelated are Informer and List for the
	// resources Watch follows (related objects and namespaces): their
	// caches hold every object, whatever the partitions. Watching tells
	// whether Watch's resources are still followed for the controller (a
	// new registration lets them go).
	RelatedInformer(gvr schema.GroupVersionResource) cache.SharedIndexInformer
	ListRelated(gvr schema.GroupVersionResource, namespace string, sel labels.Selector) ([]*unstructured.Unstructured, error)
	Watching(controller string, gvrs ...schema.GroupVersionResource) bool
	// Meta is a cached object's metadata, not decoding the object.
	Meta(gvr schema.GroupVersionResource, namespace, name string) (metav1.Object, error)
	LastSyncResourceVersion(gvr schema.GroupVersionResource) string
}

// New makes a watcher over the registry's controllers, publishing to js.
func New(reg Registry, js jetstream.JetStream, opts Options, log *slog.Logger) *Watcher {
	if opts.Partitions <= 0 {
		opts.Partitions = bus.DefaultPartitions
	}
	if opts.Workers <= 0 {
		opts.Workers = 8
	}
	w := &Watcher{
		reg:  reg,
		js:   js,
		opts: opts,
		log:  log.With("component", "watcher"),
		// A sync is the root of the trace of a parent's change.
		tracer: tracing.Tracer(opts.TracerProvider),
		// A parent whose request cannot be published (the bus is electing a
		// leader, or down) is retried with a backoff capped at 10s, so it is
		// published soon after the bus is back.
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.NewTypedMaxOfRateLimiter(
			workqueue.NewTypedItemExponentialFailureRateLimiter[parentKey](5*time.Millisecond, 10*time.Second),
			&workqueue.TypedBucketRateLimiter[parentKey]{Limiter: rate.NewLimiter(rate.Limit(100), 500)},
		), workqueue.TypedRateLimitingQueueConfig[parentKey]{Name: "parents"}),
		laterResyncs: workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[parentKey]{Name: "resyncs"}),
		handlers:     map[string][]handler{},
		customize:    customizeCache{parents: map[types.UID]*customized{}},
	}
	w.applying.sync, w.applying.behind, w.applying.unseen, w.applying.log = w.queueSync, w.behind, w.unseen, w.log
	w.republish = newRepublisher(js, w.log, func(key parentKey) { w.resyncAfter(key, 0) })
	w.republish.firstRetry = w.firstRetry
	w.chain = newRequestChain(js)
	w.unsubscribe = reg.Subscribe(w.onController)
	return w
}

// Close stops following the registry's controllers: the watcher's handlers
// leave the shared informers. A watcher runs once (Run); a process that
// leads again makes a new one.
func (w *Watcher) Close() {
	w.unsubscribe()
	w.mu.Lock()
	defer w.mu.Unlock()
	for name, hs := range w.handlers {
		for _, h := range hs {
			_ = h.informer.RemoveEventHandler(h.reg)
		}
		delete(w.handlers, name)
	}
}

// Run syncs parents until ctx ends. It also serves resync requests: a
// reply's resyncAfterSeconds syncs its parent once more after that delay.
func (w *Watcher) Run(ctx context.Context) error {
	defer w.queue.ShutDown()
	defer w.laterResyncs.ShutDown()
	sub, err := w.js.Conn().Subscribe(bus.AllResyncs(), w.onResync)
	if err != nil {
		return err
	}
	defer func() { _ = sub.Unsubscribe() }()
	applying, err := w.js.Conn().Subscribe(bus.AllApplying(), w.onApplying)
	if err != nil {
		return err
	}
	defer func() { _ = applying.Unsubscribe() }()
	inspects, err := w.js.Conn().Subscribe(bus.AllInspects(), w.onInspect)
	if err != nil {
		return err
	}
	defer func() { _ = inspects.Unsubscribe() }()
	deadLetters, err := w.js.Conn().Subscribe(topology.DeadLetters.Subjects(), w.onDeadLetter)
	if err != nil {
		return err
	}
	defer func() { _ = deadLetters.Unsubscribe() }()
	// A NATS cluster electing its leaders drops requests: retry, each
	// attempt bounded.
	unsettled := bus.NewUnsettled()
	go unsettled.Run(ctx, bus.ProgressEvery)
	var customize []*topology.KeptConsumer
	for _, c := range w.consumers() {
		var kept *topology.KeptConsumer
		err = wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(poll context.Context) (bool, error) {
			attempt, cancel := context.WithTimeout(poll, 10*time.Second)
			defer cancel()
			if kept, err = w.consumeCustomizeReplies(ctx, attempt, c, unsettled, nil); err != nil {
				w.log.Warn("retrying", "what", "consume customize replies", "consumer", c.Name(), "err", err)
				return false, nil
			}
			return true, nil
		})
		if err != nil {
			return fmt.Errorf("consume customize replies: %w", err)
		}
		defer kept.Stop()
		customize = append(customize, kept)
	}
	w.consuming.Store(true)
	defer w.consuming.Store(false)
	syncing := w.worker().Start(ctx, w.queue, w.opts.Workers)
	go w.queueDueResyncs()
	go w.republish.run(ctx)
	var keeping sync.WaitGroup
	for _, c := range customize {
		keeping.Go(func() { c.Keep(ctx, w.log) })
	}
	keeping.Wait()
	// The term is over once no sync runs: a shard's partition is handed
	// over, or a standby may lead, with no publish of this term in flight.
	w.queue.ShutDown()
	syncing()
	return nil
}

// Consumers names the consumers of customize replies the watcher needs
// while it runs (a standby needs none): the one of every partition, or a
// shard's partitions' own.
func (w *Watcher) Consumers() []topology.Consumer {
	if !w.consuming.Load() {
		return nil
	}
	return w.consumers()
}

// role is what the watcher does on the bus: the one watcher's, or a
// shard's. Its Deletes are the consumers of the other kind, which overlap
// its own on the work-queue stream: turning sharding on or off leaves
// them, and the watcher deletes them when the server refuses its own
// because of them (topology.Displacing).
//
// While a process of the other kind still runs (a rolling change of
// flags), it creates its consumers again as soon as they are deleted, and
// may be quicker than this watcher's: Run then tries again every second,
// deleting them each time, and fails after two minutes as when the bus
// cannot be reached; once running, the two take the replies in turn, each
// deleting the other's consumers at most every bus.CheckEvery. No reply is
// lost meanwhile: the stream keeps each until a consumer acknowledges it,
// and the last process standing takes them all.
func (w *Watcher) role() topology.Role {
	if w.opts.Held == nil {
		return topology.Watcher(w.opts.Partitions)
	}
	return topology.ShardedWatcher(w.opts.Partitions)
}

func (w *Watcher) consumers() []topology.Consumer {
	if w.opts.Held == nil {
		return []topology.Consumer{topology.WatcherConsumer}
	}
	out := make([]topology.Consumer, 0, len(w.opts.Held))
	for _, n := range w.opts.Held {
		out = append(out, topology.WatcherConsumerOf(n))
	}
	return out
}

// onResync queues the parent of a resync request (see bus.ResyncPrefix),
// and answers the request when it asks for an answer.
func (w *Watcher) onResync(msg *nats.Msg) {
	var r bus.Resync
	if err := json.Unmarshal(msg.Data, &r); err != nil {
		w.log.Error("bad resync request", "subject", msg.Subject, "err", err)
		w.answerResync(msg, fmt.Errorf("bad resync request: %w", err))
		return
	}
	controller, ok := bus.ControllerOf(msg.Subject)
	if !ok {
		return
	}
	if _, ok := w.reg.Get(controller); !ok {
		w.answerResync(msg, fmt.Errorf("controller %s is not registered with the watcher", controller))
		return
	}
	key := parentKey{controller, r.Resource, r.Namespace, r.Name}
	if !w.watches(key) {
		return // another shard's: it answers
	}
	if r.AfterSeconds <= 0 {
		// A sync now (uc resync, after fixing a hook): not deferred by
		// the parent's backoff, which starts again.
		w.republish.changed(key, time.Now())
	}
	w.resyncAfter(key, time.Duration(r.AfterSeconds*float64(time.Second)))
	w.answerResync(msg, nil)
}

// watches tells whether this watcher publishes for the parent of key: the
// one watcher of an installation does for every parent; a shard, for the
// parents of its partitions, which are those in its caches.
func (w *Watcher) watches(key parentKey) bool {
	if w.opts.Held == nil {
		return true
	}
	ctl, ok := w.reg.Get(key.Controller)
	if !ok {
		return false
	}
	res := ctl.Parent
	if key.Resource != "" {
		if ctl.Decorator == nil {
			return false
		}
		d, ok := ctl.Decorator.Decorated(key.Resource)
		if !ok {
			return false
		}
		res = d.Resource
	}
	_, err := w.reg.Meta(res.GVR, key.Namespace, key.Name)
	return err == nil
}

// answerResync answers a resync request that has a reply subject: queued,
// or the problem.
func (w *Watcher) answerResync(msg *nats.Msg, problem error) {
	if msg.Reply == "" {
		return
	}
	var a bus.ResyncAnswer
	if problem != nil {
		a.Error = problem.Error()
	}
	b, _ := json.Marshal(a)
	if err := msg.Respond(b); err != nil {
		w.log.Warn("answer a resync request", "subject", msg.Subject, "err", err)
	}
}

// onInspect answers uc trace's question about a parent (see
// bus.InspectPrefix): the last request the watcher published for it, and,
// when asked, the request itself (uc render --from-trace).
func (w *Watcher) onInspect(msg *nats.Msg) {
	var q bus.Question
	var answer bus.LastPublished
	controller, ok := bus.ControllerOf(msg.Subject)
	if err := json.Unmarshal(msg.Data, &q); err != nil || !ok {
		answer.Error = fmt.Sprintf("not a question about a parent on %s: %v", msg.Subject, err)
	} else {
		key := parentKey{Controller: controller, Resource: q.Resource, Namespace: q.Namespace, Name: q.Name}
		if !w.watches(key) {
			return // another shard's: it answers
		}
		last, published := w.chain.lastOf(key)
		if published {
			answer = bus.LastPublished{ID: last.id, Hook: last.hook, Generation: last.generation, ResourceVersion: last.resourceVersion,
				Observation: last.observation, Published: last.at}
		}
		if q.Request {
			var err error
			if answer.Request, err = w.currentRequest(key, answer.ID); err != nil {
				answer.RequestProblem = err.Error()
			}
		}
	}
	b, _ := json.Marshal(answer)
	if err := msg.Respond(b); err != nil {
		w.log.Warn("answer a question about a parent", "subject", msg.Subject, "err", err)
	}
}

// currentRequest is the parent's request as the watcher would publish it
// now, and whether it is the one it published last, of id: one that
// observed the same (see bus.CurrentRequest).
func (w *Watcher) currentRequest(key parentKey, id string) (*bus.CurrentRequest, error) {
	ctl, ok := w.reg.Get(key.Controller)
	switch {
	case !ok:
		return nil, fmt.Errorf("controller %s is not registered with the watcher", key.Controller)
	case ctl.Decorator != nil:
		return nil, errors.New("the watcher gives the requests of a UniversalController's parents only")
	}
	ctx, cancel := context.WithTimeout(context.Background(), busTimeout)
	defer cancel()
	b, err := w.build(ctx, ctl, key)
	switch {
	case err != nil:
		return nil, err
	case b == nil:
		return nil, errors.New("uc sends the parent no request: it is gone, not selected, or being deleted and no finalizer of uc's holds it")
	case b.failure != nil:
		return nil, fmt.Errorf("uc asks no hook about the parent: %s: %s", b.failure.Reason, b.failure.Message)
	case b.req == nil:
		return nil, errors.New("the parent's sync waits for its customize hook's reply")
	}
	data, err := json.Marshal(b.req)
	if err != nil {
		return nil, fmt.Errorf("encode the request: %w", err)
	}
	typ, subject := bus.RequestType(b.meta.Hook), b.meta.RequestSubject()
	return &bus.CurrentRequest{Hook: b.meta.Hook, Generation: b.meta.Generation, ResourceVersion: b.meta.ResourceVersion,
		Published: id != "" && sameObservedState(id, observedHash(subject, typ, observed(ctl, b.req))), Data: data}, nil
}

// worker is the watcher's worker loop: it syncs one parent at a time.
func (w *Watcher) worker() workloop.Loop[parentKey] {
	return workloop.Loop[parentKey]{
		Component: recovery.Watcher,
		Timeout:   itemTimeout,
		Sync:      w.syncTraced,
		Failed: func(key parentKey, err error) {
			w.log.Error("sync parent", "controller", key.Controller, "parent", key.String(), "err", err)
		},
		Log:     w.log,
		LogArgs: func(key parentKey) []any { return []any{"controller", key.Controller, "parent", key.String()} },
	}
}

// errNotLeading is a publish that the lease forbids (Options.Lease). It
// waits (verdict.Wait), no failure: a watcher whose lease lapsed ends its
// term, or renews it.
var errNotLeading = verdict.Wait.Mark(errors.New("not leading"))

// itemTimeout bounds the handling of one item: a parent's sync, a customize
// reply. Both read the informers' caches and publish a few requests, each
// publish bounded by the bus's own timeout, and at most wait for a new
// related resource's informer to sync (a minute, see registry.Watch): two
// minutes is far beyond a healthy sync. A hung call fails the item, which is
// retried, instead of taking a worker, and the parent, forever.
const itemTimeout = 2 * time.Minute

// busTimeout bounds each request the watcher makes to the bus (a publish,
// a read of a fence) within an item's deadline: the bus answers within
// milliseconds, or never — a NATS server that restarted has lost the
// requests in flight, and their answers with them. Without its own bound a
// request would wait for the item's whole two minutes, and with every
// worker so waiting, the watcher would stall.
const busTimeout = 5 * time.Second

// syncTraced syncs a parent in a span that starts the trace of the change.
// The sync serves the parent's resync, if one is due; if it fails and is
// retried (a panic too), the retry serves it.
func (w *Watcher) syncTraced(ctx context.Context, key parentKey) (err error) {
	resync, served := w.resyncs.take(key), false
	defer func() {
		if resync && !served {
			w.resyncs.add(key)
		}
	}()
	ctx, span := w.tracer.Start(ctx, "sync")
	tracing.SetAttributes(span, func() []attribute.KeyValue {
		return []attribute.KeyValue{tracing.KeyController.String(key.Controller), tracing.KeyParent.String(key.String()), attribute.Bool("uc.resync", resync)}
	})
	defer func() { tracing.End(span, err) }()
	err = w.sync(ctx, key, resync)
	served = err == nil || verdict.Of(err) == verdict.Permanent // not retried
	return err
}
