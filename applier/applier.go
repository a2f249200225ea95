package applier

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/trace"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"universalcontroller.dev/uc/core"
	"universalcontroller.dev/uc/internal/registry"
	"universalcontroller.dev/uc/internal/shares"
	"universalcontroller.dev/uc/internal/topology"
	"universalcontroller.dev/uc/internal/tracing"
	"universalcontroller.dev/uc/schemas/bus"
)

// Options tune an Applier.
type Options struct {
	// Workers is the number of parents applied at once.
	Workers int
	// Replicas of the fence and ownership buckets (1 on a single server).
	Replicas int
	// Partitions parents are spread over; the watcher's number.
	Partitions int
	// ReplicaID names this replica across its restarts: restarted with the
	// same id, it takes back the partitions it held at once instead of
	// waiting for their keys to expire. Two live replicas must never share
	// one. Empty: a new id for every run.
	ReplicaID string
	// MaxChildren bounds the children of one reply (default
	// DefaultMaxChildren): a reply with more is rejected whole, so one hook
	// cannot make the applier hold and write without bound.
	MaxChildren int
	// Preflight tells whether the apiserver could refuse a write: the
	// writes of a reply are dry-run only when it could refuse one. nil:
	// every reply's are.
	Preflight Preflight
	// TracerProvider makes the spans of the applies (nil: the global one).
	TracerProvider trace.TracerProvider
	// HookEvents records the events hooks' replies ask for (nil: the
	// Applier's recorder), with HookEventCorrelation.
	HookEvents record.EventRecorder
	// Observer hears how applies end (default: nobody).
	Observer Observer
	// Shadows hears how the replies of sync hooks' shadows compare with
	// the sync hooks' (default: nobody).
	Shadows ShadowObserver
	// Caches, when set, fill the caches of the partitions this replica
	// holds, which hold only their objects (the registry's, made with
	// registry.WithHeldPartitions). nil: the registry caches every
	// partition.
	Caches PartitionCaches
}

// DefaultMaxChildren is the default of Options.MaxChildren.
const DefaultMaxChildren = 1000

// Applier applies hook replies: intake takes them off the bus for the
// partitions this replica holds, the reconciler applies one parent at a
// time, and the writer makes its children's writes (see the package
// comment).
type Applier struct {
	js   jetstream.JetStream
	opts Options
	log  *slog.Logger
	in   *intake
	rec  *reconciler
	// labels keeps the partition label on the objects of sharded
	// controllers (labeller.go).
	labels *labeller
}

// Registry is what the applier needs of the registered controllers and
// their caches (internal/registry's Registry).
type Registry interface {
	// Get returns a registered controller; MayExist tells one that another
	// role of the process may register soon.
	Get(name string) (*core.Controller, bool)
	MayExist(name string) bool
	// Cache holds the live parents and children the core plans against.
	core.Cache
	// StatusSchema is what a parent resource's status admits.
	StatusSchema(res core.Resource) *core.StatusSchema
	// ParentFailed and ParentApplied keep the tally of failing parents
	// that a UniversalController's status reports.
	ParentFailed(controller string, parent *unstructured.Unstructured, reason, message string)
	ParentApplied(controller string, parent *unstructured.Unstructured) (wasFailing bool)
	// Subscribe tells of every controller registered, changed or removed;
	// OnOwned follows the cached objects of a resource, EachOwned lists
	// them, and Meta is a cached object's metadata (the labeller's).
	Subscribe(l registry.Listener) (unsubscribe func())
	OnOwned(gvr schema.GroupVersionResource, handler cache.ResourceEventHandler) (remove func())
	EachOwned(gvr schema.GroupVersionResource, fn func(metav1.Object))
	Meta(gvr schema.GroupVersionResource, namespace, name string) (metav1.Object, error)
}

// New makes an Applier.
func New(reg Registry, dyn dynamic.Interface, js jetstream.JetStream, events record.EventRecorder, opts Options, log *slog.Logger) *Applier {
	if opts.Workers <= 0 {
		opts.Workers = 16
	}
	if opts.Partitions <= 0 {
		opts.Partitions = bus.DefaultPartitions
	}
	if opts.MaxChildren <= 0 {
		opts.MaxChildren = DefaultMaxChildren
	}
	if opts.HookEvents == nil {
		opts.HookEvents = events
	}
	if opts.Observer == nil {
		opts.Observer = nobody{}
	}
	if opts.Shadows == nil {
		opts.Shadows = nobody{}
	}
	log = log.With("component", "applier")
	tracer := tracing.Tracer(opts.TracerProvider)
	rec := &reconciler{
		reg: reg, dyn: dyn, js: js, events: events, hookEvents: opts.HookEvents, maxChildren: opts.MaxChildren,
		observer: opts.Observer, shadowObserver: opts.Shadows, log: log, tracer: tracer,
		writer:  &writer{dyn: dyn, events: events, tracer: tracer, log: log, preflight: opts.Preflight},
		shadows: newShadows(),
	}
	in := newIntake(rec, opts.Observer, opts.Workers, log)
	rec.failures = in.failures
	return &Applier{js: js, opts: opts, log: log, in: in, rec: rec,
		labels: newLabeller(reg, dyn, events, opts.Partitions, func(n int) bool { return in.partition(n) != nil }, opts.Caches != nil, log)}
}

// Run consumes and applies the replies of the partitions this replica holds
// until ctx ends.
func (a *Applier) Run(ctx context.Context) error {
	defer a.in.shutDown()
	var (
		own *shares.Shares
		h   *holder
	)
	err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		attempt, cancel := context.WithTimeout(ctx, 10*time.Second) // a cluster electing its leader drops requests
		defer cancel()
		var err error
		if a.rec.fence, err = newKVFence(attempt, a.js, a.opts.Replicas); err == nil {
			own, h, err = newShares(attempt, a.js, a.in, a.opts, a.log)
		}
		if err != nil {
			a.log.Warn("retrying", "what", "create the fence and ownership buckets", "err", err)
		}
		return err == nil, nil
	})
	if err != nil {
		return fmt.Errorf("create the applier's buckets: %w", err)
	}
	// The replies this replica has not settled are kept from redelivery
	// until it has left and released its partitions.
	tracking, stopTracking := context.WithCancel(context.WithoutCancel(ctx))
	defer stopTracking()
	go h.unsettled.Run(tracking, bus.ProgressEvery)
	h.taken = a.labels.rescan
	a.in.work(ctx, a.opts.Workers)
	go a.rec.runShadows(ctx)
	go a.labels.run(ctx)
	a.log.Info("applying replies", "replica", own.ID())
	own.Run(ctx)
	return nil
}

// Consumers names the consumers of the partitions this replica holds: they
// must exist for it to be ready.
func (a *Applier) Consumers() []topology.Consumer { return a.in.consumers() }

// Rollouts are the rollouts in progress in the partitions this replica
// holds, by controller, as their last steps left them.
func (a *Applier) Rollouts() map[string]Rollouts {
	out := map[string]Rollouts{}
	for _, p := range a.in.heldPartitions() {
		p.parents.addRollouts(out)
	}
	return out
}

// PartitionParents are, for each partition this replica holds, the
// parents it knows in it: those it applied, or read the fence of, since it
// took the partition.
func (a *Applier) PartitionParents() map[int]int {
	out := map[int]int{}
	for _, p := range a.in.heldPartitions() {
		out[p.n] = p.parents.count()
	}
	return out
}
