// Package applier makes the cluster match the hook replies on the bus. It
// consumes replies, keeps only the newest per parent, applies one parent at a
// time, creates and updates children with server-side apply (one field
// manager per controller), deletes children no longer desired with UID
// preconditions, and writes the parent's status. A reply computed from an
// older observation than one already applied is dropped (the fence), and an
// invalid reply is rejected whole, with a Warning Event and a status
// condition on the parent.
package applier

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/errgroup"
	"golang.org/x/time/rate"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/csaupgrade"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"universalcontroller.dev/uc/internal/recovery"
	"universalcontroller.dev/uc/internal/registry"
	"universalcontroller.dev/uc/internal/tracing"
	"universalcontroller.dev/uc/internal/workloop"
	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/schemas/v1alpha1"
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
}

// DefaultMaxChildren is the default of Options.MaxChildren.
const DefaultMaxChildren = 1000

// Applier applies hook replies.
type Applier struct {
	reg    *registry.Registry
	dyn    dynamic.Interface
	js     jetstream.JetStream
	events record.EventRecorder
	opts   Options
	log    *slog.Logger
	tracer trace.Tracer
	fence  *kvFence
	queue  workqueue.TypedRateLimitingInterface[types.UID]

	mu      sync.Mutex
	pending map[types.UID]*batch // newest replies per parent (bus.Address.ApplyKey), not yet being applied
	held    map[int]*partition   // the partitions this replica holds

	waiting   sync.Map    // controllers whose replies waited for the registry, said once each
	decorated decorations // what decorators last wrote to decorated objects
	failing   failing     // the failures reported on parents whose apply is retried
	shadows   *shadows    // the replies of sync hooks' shadows, waiting for the sync hooks'
}

// New makes an Applier.
func New(reg *registry.Registry, dyn dynamic.Interface, js jetstream.JetStream, events record.EventRecorder, opts Options, log *slog.Logger) *Applier {
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
	limiter := workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[types.UID](100*time.Millisecond, 30*time.Second),
		&workqueue.TypedBucketRateLimiter[types.UID]{Limiter: rate.NewLimiter(rate.Limit(50), 300)},
	)
	return &Applier{
		reg: reg, dyn: dyn, js: js, events: events, opts: opts,
		log:     log.With("component", "applier"),
		tracer:  tracing.Tracer(opts.TracerProvider),
		queue:   workqueue.NewTypedRateLimitingQueueWithConfig(limiter, workqueue.TypedRateLimitingQueueConfig[types.UID]{Name: "replies"}),
		pending: map[types.UID]*batch{},
		held:    map[int]*partition{},
		shadows: newShadows(),
	}
}

// Run consumes and applies the replies of the partitions this replica holds
// until ctx ends.
func (a *Applier) Run(ctx context.Context) error {
	defer a.queue.ShutDown()
	var own *owner
	err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		attempt, cancel := context.WithTimeout(ctx, 10*time.Second) // a cluster electing its leader drops requests
		defer cancel()
		var err error
		if a.fence, err = newKVFence(attempt, a.js, a.opts.Replicas); err == nil {
			own, err = newOwner(attempt, a)
		}
		if err != nil {
			a.log.Warn("retrying", "what", "create the fence and ownership buckets", "err", err)
		}
		return err == nil, nil
	})
	if err != nil {
		return fmt.Errorf("create the applier's buckets: %w", err)
	}
	a.worker().Run(ctx, a.queue, a.opts.Workers)
	go a.runShadows(ctx)
	a.log.Info("applying replies", "replica", own.id)
	own.run(ctx)
	return nil
}

// receive keeps the newest replies of each parent and queues the parent once
// it has every reply of its newest observation.
func (a *Applier) receive(msg jetstream.Msg) {
	e, err := bus.FromMsg(context.Background(), msg.Subject(), msg.Headers(), msg.Data())
	var meta bus.Meta
	if err == nil {
		meta, err = bus.MetaOfReply(msg.Subject(), e)
	}
	if err != nil {
		a.log.Error("dropping a reply that is not a uc reply", "subject", msg.Subject(), "err", err)
		_ = msg.Term()
		return
	}
	r := &reply{msg: msg, meta: meta, typ: e.Type(), data: e.Data(), sent: e.Time(),
		span: trace.SpanContextFromContext(bus.ExtractTrace(context.Background(), e))}
	if meta.Hook == hooks.SyncShadow {
		_ = msg.Ack() // never applied
		a.receiveShadow(r)
		return
	}
	a.mu.Lock()
	key := meta.ApplyKey()
	b := a.pending[key]
	if b != nil && b.meta.Observation > meta.Observation {
		a.mu.Unlock()
		_ = msg.Ack() // an older observation than one already waiting
		return
	}
	var superseded *batch
	if b == nil || b.meta.Observation < meta.Observation {
		superseded, b = b, newBatch(meta)
		a.pending[key] = b
	}
	replaced := b.add(r)
	complete := b.complete()
	a.mu.Unlock()
	if superseded != nil {
		superseded.each(ack)
	}
	if replaced != nil && !bus.SameMessage(replaced.msg, msg) {
		_ = replaced.msg.Ack() // superseded by r
	}
	if complete {
		a.queue.Add(key)
	}
}

// worker is the applier's worker loop: it applies one parent's replies at
// a time.
func (a *Applier) worker() workloop.Loop[types.UID] {
	return workloop.Loop[types.UID]{
		Component: recovery.Applier,
		Timeout:   applyTimeout,
		Sync:      a.applyNext,
		Failed: func(uid types.UID, err error) {
			meta := a.pendingMeta(uid)
			if !errors.Is(err, errNotRegisteredYet) {
				a.log.Error("apply failed; will retry", append(meta.LogArgs(), "failures", a.queue.NumRequeues(uid)+1, "err", err)...)
				a.observer().Failed(meta)
			} else if _, said := a.waiting.LoadOrStore(meta.Controller, true); !said {
				// Not a failure: this replica's registry catches up with the
				// controller soon (after a restart, with every parent at once).
				a.log.Debug("replies wait for the controller to be registered here", "controller", meta.Controller)
			}
		},
		Log:     a.log,
		LogArgs: func(uid types.UID) []any { return a.pendingMeta(uid).LogArgs() },
	}
}

// pendingMeta is the meta of the replies waiting for the parent with that
// apply key, or only the key when none wait.
func (a *Applier) pendingMeta(uid types.UID) bus.Meta {
	a.mu.Lock()
	defer a.mu.Unlock()
	if b := a.pending[uid]; b != nil {
		return b.meta
	}
	return bus.Meta{Address: bus.Address{ParentUID: uid}}
}

// applyTimeout bounds one apply: a hung apiserver call must not hold a
// parent, and with it its partition's hand-over, forever. An apply makes a
// few reads and the writes of one reply, 8 at a time, each bounded by the
// REST client's own timeout: two minutes is far beyond a healthy apply,
// even of a reply with thousands of children. A failed apply is retried.
const applyTimeout = 2 * time.Minute

// applyNext applies the replies waiting for the parent with that apply key,
// once they are complete, while this replica holds the parent's partition:
// once the hold ends, another replica may apply the parent, and this apply
// stops before its next write. Replies that were not applied — an error, a
// panic — are put back for the retry.
func (a *Applier) applyNext(ctx context.Context, uid types.UID) error {
	a.mu.Lock()
	b := a.pending[uid]
	if b != nil && b.complete() {
		delete(a.pending, uid)
	} else {
		b = nil
	}
	a.mu.Unlock()
	if b == nil {
		return nil
	}
	part, hold, ok := a.begin(b.meta.Partition)
	if !ok {
		b.each(nak) // the partition moved to another replica
		return nil
	}
	defer part.active.Done()
	applied := false
	defer func() {
		if !applied {
			a.putBack(uid, b)
		}
	}()
	log := a.log.With(b.meta.LogArgs()...)
	log.Debug("apply", "phase", "start", "at", time.Now().UnixNano())
	a.announce(b.meta, false)
	defer func() {
		a.announce(b.meta, true)
		log.Debug("apply", "phase", "end", "at", time.Now().UnixNano())
	}()
	if err := a.applyHeld(ctx, hold, part, b); err != nil {
		return err
	}
	applied = true
	a.failing.forget(uid)
	b.each(ack)
	return nil
}

// applyHeld applies a batch in a span that continues the trace of its
// reply, while this replica holds the batch's partition.
func (a *Applier) applyHeld(ctx, hold context.Context, part *partition, b *batch) (err error) {
	ctx, span := a.traceApply(ctx, b)
	defer func() { tracing.End(span, err) }()
	ctx, cancel := whileHeld(ctx, hold)
	defer cancel()
	if err := a.apply(ctx, part, b); err != nil {
		if cause := context.Cause(ctx); errors.Is(cause, errHoldLost) {
			return fmt.Errorf("%w (%w)", err, cause)
		}
		return err
	}
	return nil
}

// errNotRegisteredYet is a reply of a controller that another role of uc
// registered before this replica did: it waits.
var errNotRegisteredYet = errors.New("not registered here yet")

// putBack puts a failed batch back unless newer replies arrived meanwhile.
func (a *Applier) putBack(uid types.UID, b *batch) {
	a.mu.Lock()
	defer a.mu.Unlock()
	newer := a.pending[uid]
	if newer == nil {
		a.pending[uid] = b
	}
	switch {
	case newer == nil:
		b.each(inProgress)
	case newer.meta.Observation > b.meta.Observation:
		b.each(ack)
	default:
		// The same replies, delivered again while b was applied: b is
		// complete, keep it.
		a.pending[uid] = b
	}
}

// apply makes the cluster match the replies of one observation of a parent.
// It is idempotent.
func (a *Applier) apply(ctx context.Context, part *partition, b *batch) error {
	r := b.latest()
	m := r.meta
	log := a.log.With(append(m.LogArgs(), "hook", m.Hook, "observation", m.Observation)...)
	ctl, ok := a.reg.Get(m.Controller)
	if !ok && a.reg.MayExist(m.Controller) {
		// Another role registered it first: the reply waits for this one.
		return fmt.Errorf("controller %s: %w", m.Controller, errNotRegisteredYet)
	}
	if !ok {
		log.Info("controller not registered; dropping reply")
		return nil
	}
	if m.Hook != hooks.Sync && m.Hook != hooks.Finalize {
		log.Error("dropping a reply of a hook the applier does not apply")
		return nil
	}
	last, err := a.lastApplied(ctx, part, m.ApplyKey())
	if err != nil {
		return err
	}
	if m.Observation < last {
		log.Debug("dropping a reply older than one already applied")
		return nil
	}
	if ctl.Decorator != nil {
		return a.decorate(ctx, part, ctl, b, log)
	}
	parent, err := a.parent(ctx, ctl, m)
	if err != nil || parent == nil {
		part.forget(m.ApplyKey())
		return err
	}
	if err := a.applyTo(ctx, part, ctl, parent, b, log); err != nil {
		a.reportFailing(ctx, log, ctl, parent, m, err)
		return err
	}
	a.syncReplied(ctl, r)
	return nil
}

// applyTo makes the parent's children, status and finalizer match the
// replies of the batch, and advances the fence.
func (a *Applier) applyTo(ctx context.Context, part *partition, ctl *registry.Controller, parent *unstructured.Unstructured, b *batch, log *slog.Logger) error {
	m := b.latest().meta
	if f := b.failure(); f != nil {
		reason, problem := decodeFailure(f)
		return a.reject(ctx, log, ctl, parent, m, reason, problem)
	}
	planCtx, span := a.tracer.Start(ctx, "plan")
	replies, err := b.decode(ctl.Spec.Hooks.Named(m.Hook).StrictReplies(), a.opts.MaxChildren)
	resp := replies[m.LatestRevision()]
	var ro *rollout
	if err == nil && ctl.Rolling() {
		if ro, err = a.rollout(planCtx, ctl, parent, m, replies); err != nil {
			tracing.End(span, err)
			return err
		}
		step := *resp
		step.Children = ro.children
		resp = &step
	}
	var actions []action
	if err == nil {
		actions, err = plan(ctl, parent, resp, cacheLookup{a.reg})
	}
	tracing.SetAttributes(span, func() []attribute.KeyValue { return []attribute.KeyValue{attribute.Int("uc.writes", len(actions))} })
	tracing.End(span, err)
	if err != nil {
		reason, problem := invalidReply(m.Hook, err)
		return a.reject(ctx, log, ctl, parent, m, reason, problem)
	}
	conditions := replyConditions(resp, m.Generation)
	if ro != nil {
		actions = ro.keepOnly(actions)
		conditions = append(conditions, ro.condition(m.Generation))
	}
	if ctl.DryRun() {
		return a.dryRun(ctx, part, ctl, parent, m, resp, actions, conditions)
	}
	if ro != nil {
		// The rollout's progress is saved before any child is touched.
		if err := a.saveRevisions(ctx, ro); err != nil {
			return err
		}
		part.rolled(m.ApplyKey(), ctl, ro)
	}
	changed, err := a.execute(ctx, ctl, parent, actions)
	if err != nil {
		if reason, problem := classify(m.Hook, err); problem != nil {
			return a.reject(ctx, log, ctl, parent, m, reason, problem)
		}
		return err
	}
	if part.deferStatus(parent, resp, changed) {
		log.Debug("status left to the sync that follows the children's change")
	} else if err := a.writeStatus(ctx, ctl, parent, resp.Status, m.Generation, conditions...); err != nil {
		return err
	}
	// The finalizer stays while a finalize hook exists and has not said
	// finalized.
	keep := ctl.Spec.Hooks.Finalize != nil && (m.Hook == hooks.Sync || !resp.Finalized)
	if err := a.setFinalizer(ctx, ctl, parent, keep); err != nil {
		return err
	}
	if resp.ResyncAfterSeconds > 0 {
		a.resyncAfter(m, resp.ResyncAfterSeconds)
	}
	log.Debug("applied", "writes", len(actions))
	if err := a.advanceFence(ctx, part, m); err != nil {
		return err
	}
	a.recordHookEvents(parent, resp.Events)
	return nil
}

// parent returns the parent the reply is for, or nil when it is gone or was
// replaced by another object of the same name. A replica's cache can lag
// behind the watcher's (another replica's, or a parent just created): when
// the cache does not have the parent the reply names, the apiserver decides.
func (a *Applier) parent(ctx context.Context, ctl *registry.Controller, m bus.Meta) (*unstructured.Unstructured, error) {
	p, err := a.reg.Object(ctl.Parent.GVR, m.Namespace, m.Name)
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, err
	}
	if err == nil && p.GetUID() == m.ParentUID {
		return p, nil
	}
	p, err = a.dyn.Resource(ctl.Parent.GVR).Namespace(m.Namespace).Get(ctx, m.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, a.fence.forget(ctx, m.ApplyKey())
	case err != nil:
		return nil, fmt.Errorf("read parent %s: %w", m.Key(), err)
	case p.GetUID() != m.ParentUID:
		return nil, nil
	}
	return p, nil
}

// decode decodes every reply of a batch, by revision. Strict (hook version
// v2 by default, see v1alpha1.Hook.StrictReplies), a field the response
// does not have, or has twice, is an error that names it. A reply with
// more than maxChildren children is an error.
func (b *batch) decode(strict bool, maxChildren int) (map[string]*hooks.SyncResponse, error) {
	out := map[string]*hooks.SyncResponse{}
	for rev, r := range b.replies {
		resp, err := decodeReply[hooks.SyncResponse](r, strict)
		if err == nil {
			err = checkCount(len(resp.Children), maxChildren)
		}
		if err != nil && rev != b.meta.LatestRevision() {
			err = fmt.Errorf("the reply for the parent at its older revision %s: %w", rev, err)
		}
		if err != nil {
			return nil, err
		}
		out[rev] = resp
	}
	return out, nil
}

// decodeReply decodes a sync or finalize reply: a hooks.SyncResponse, or a
// decorator's hooks.DecoratorResponse. Strict, a field the response type
// does not have, or one given twice, is an error.
func decodeReply[T any](r *reply, strict bool) (*T, error) {
	if err := checkType(r); err != nil {
		return nil, err
	}
	return decodeData[T](r.meta.Hook, r.data, strict)
}

// checkType checks that a reply is its hook's response, not a failure.
func checkType(r *reply) error {
	if want := bus.ResponseType(r.meta.Hook); r.typ != want {
		return fmt.Errorf("event type %q, want %q", r.typ, want)
	}
	return nil
}

// decodeData decodes the data of a hook's reply (see decodeReply).
func decodeData[T any](hook string, data []byte, strict bool) (*T, error) {
	var resp T
	if err := hooks.DecodeReply(data, &resp, strict); err != nil {
		return nil, fmt.Errorf("not a valid %s response: %w", hook, err)
	}
	return &resp, nil
}

// decodeSync decodes the data of a sync or finalize reply, which may have
// at most maxChildren children.
func decodeSync(hook string, data []byte, strict bool, maxChildren int) (*hooks.SyncResponse, error) {
	resp, err := decodeData[hooks.SyncResponse](hook, data, strict)
	if err == nil {
		err = checkCount(len(resp.Children), maxChildren)
	}
	return resp, err
}

// checkCount refuses a reply with more than limit children or attachments.
func checkCount(n, limit int) error {
	if n > limit {
		return fmt.Errorf("%d children, more than the %d a reply may have (uc's --max-children-per-reply)", n, limit)
	}
	return nil
}

// decodeFailure turns a failure event into the reason and problem reported
// on the parent: a hook that failed its deliveries, or a parent the watcher
// could not make a request for.
func decodeFailure(r *reply) (string, error) {
	var f bus.Failure
	if err := utiljson.Unmarshal(r.data, &f); err != nil {
		return v1alpha1.ReasonHookFailed, fmt.Errorf("%s hook failed (its failure report is unreadable: %w)", r.meta.Hook, err)
	}
	return failed(r.meta.Hook, f)
}

// failed is the reason and problem reported on the parent for a failure
// report.
func failed(hook string, f bus.Failure) (string, error) {
	switch {
	case f.Deliveries == 0:
		return f.Reason, errors.New(f.Message)
	case f.Retrying:
		return v1alpha1.ReasonHookFailed, fmt.Errorf("%s hook failed, will retry: %s: %s", hook, f.Reason, f.Message)
	}
	return v1alpha1.ReasonHookFailed, fmt.Errorf("%s hook failed after %d deliveries: %s: %s", hook, f.Deliveries, f.Reason, f.Message)
}

// invalidReply is the reason and problem reported on the parent for a
// reply uc refuses: err says why.
func invalidReply(hook string, err error) (string, error) {
	return v1alpha1.ReasonInvalidHookReply, fmt.Errorf("%s hook reply rejected: %w", hook, err)
}

// reject reports a reply that cannot be applied on the parent — a Warning
// Event and a Synced=False condition naming the problem — and touches
// nothing else.
func (a *Applier) reject(ctx context.Context, log *slog.Logger, ctl *registry.Controller, parent *unstructured.Unstructured, m bus.Meta, reason string, problem error) error {
	log.Error("reply rejected", "reason", reason, "err", problem)
	a.observer().Rejected(m, reason)
	if ctl.DryRun() {
		return a.rejectDryRun(ctx, m, reason, problem)
	}
	a.warn(ctl, parent, reason, problem.Error())
	if err := a.writeStatus(ctx, ctl, parent, nil, m.Generation, failedCondition(m.Generation, reason, problem.Error())); err != nil {
		return err
	}
	return nil
}

// warn records a Warning Event on obj about a sync that failed. For a
// controller served from Metacontroller's API its reason is Metacontroller's
// own, SyncError, with uc's reason leading the message, so that what
// watched Metacontroller's Events (alerts, `kubectl get events
// --field-selector reason=SyncError`) still sees them.
func (a *Applier) warn(ctl *registry.Controller, obj *unstructured.Unstructured, reason, message string) {
	if ctl.Metacontroller {
		reason, message = v1alpha1.ReasonSyncError, "Sync error: "+reason+": "+message
	}
	a.events.Event(obj, "Warning", reason, message)
}

// reportAfterFailures is the number of failed applies in a row after which
// a failure that is retried is reported on the parent: a failure that
// persists reaches the parent's user, a passing one (a conflict, a
// restarting apiserver) does not.
const reportAfterFailures = 3

// reportFailing reports on the parent an apply that keeps failing and is
// retried — a Warning Event ApplyFailed and, for a controller's parent, a
// Synced=False condition, both naming the error — once it failed
// reportAfterFailures times in a row. A failure already reported is not
// reported again: the Event once per distinct error, the condition once
// per distinct error and generation; the next apply that succeeds sets
// Synced=True.
func (a *Applier) reportFailing(ctx context.Context, log *slog.Logger, ctl *registry.Controller, parent *unstructured.Unstructured, m bus.Meta, err error) {
	key := m.ApplyKey()
	if a.queue.NumRequeues(key)+1 < reportAfterFailures || ctl.DryRun() {
		return // a dry-run controller's parents are not written to, not even to say so
	}
	message := fmt.Sprintf("the apply keeps failing; uc retries it with backoff: %v", err)
	newError, newGeneration := a.failing.report(key, message, m.Generation)
	if newError {
		log.Warn("apply keeps failing; reported on the parent", "err", err)
		a.warn(ctl, parent, v1alpha1.ReasonApplyFailed, message)
	}
	if !newError && !newGeneration || ctl.Decorator != nil {
		return // uc adds no condition to a decorated object
	}
	if err := a.writeStatus(ctx, ctl, parent, nil, m.Generation, failedCondition(m.Generation, v1alpha1.ReasonApplyFailed, message)); err != nil {
		log.Warn("report a failing apply in the parent's status; will retry", "err", err)
		a.failing.forget(key)
	}
}

// failing remembers, per parent (by bus.Address.ApplyKey), the failure last
// reported on it, until an apply succeeds.
type failing struct {
	mu       sync.Mutex
	reported map[types.UID]failure
}

type failure struct {
	message    string
	generation int64
}

// report remembers a failure as the parent's last, and tells whether its
// message, or only its generation, differs from the one reported before.
func (f *failing) report(key types.UID, message string, generation int64) (newMessage, newGeneration bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.reported == nil {
		f.reported = map[types.UID]failure{}
	}
	last, ok := f.reported[key]
	f.reported[key] = failure{message, generation}
	return !ok || last.message != message, ok && last.message == message && last.generation != generation
}

func (f *failing) forget(key types.UID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.reported, key)
}

// classify tells a failed write that retrying the same reply cannot help
// — uc refusing the hook's objects (InvalidHookReply), or the apiserver
// (ApplyFailed) — from one worth retrying (problem nil).
func classify(hook string, err error) (reason string, problem error) {
	var refused *refusedError
	switch {
	case errors.As(err, &refused):
		return invalidReply(hook, err)
	case permanent(err):
		return v1alpha1.ReasonApplyFailed, err
	}
	return "", nil
}

// permanent errors are uc, or the apiserver, refusing the hook's objects as
// they are: the same reply meets the same answer however often it is
// retried. The reply is rejected at once; the watcher publishes a parent
// whose reply was rejected again later (see watcher/republish.go), so a
// hook fixed since, or a rule of the cluster changed since, makes the parent
// converge. They are: an object uc will not write (refusedError), one the
// apiserver finds invalid or malformed (422, 400 — a ValidatingAdmissionPolicy
// refuses with 422 unless it says otherwise), too large (413), or cannot type
// against its schema (server-side apply answers that with a 500 of its
// own), a write admission or authorization forbids (403: an admission
// webhook or policy, a quota, RBAC, a terminating namespace), one to a
// namespace or a resource the apiserver does not have (404), a verb the
// resource does not support (405).
//
// Every other error is worth a retry of the same reply, with backoff: a
// conflict (409), a timeout (504, or a context deadline), too many
// requests (429), the apiserver or an admission webhook unavailable (500,
// 503), an expired credential (401), the network, the bus. One that
// persists is reported on the parent (reportFailing).
func permanent(err error) bool {
	var refused *refusedError
	return errors.As(err, &refused) || apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) || apierrors.IsRequestEntityTooLargeError(err) ||
		untypable(err) || apierrors.IsForbidden(err) || apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err)
}

// untypable tells the apiserver's server-side apply refusing an object it
// cannot type against its schema (a field of the wrong type, or one the
// schema does not declare): it has no status code of its own and answers
// 500.
func untypable(err error) bool {
	return err != nil && strings.Contains(err.Error(), "failed to create typed patch object")
}

// execute makes the planned writes and tells whether any of them changed a
// child. A reply is never half-applied: the first write is written alone,
// then the others; when the apiserver could refuse one of the others
// (mayBeRefused), they are all tried as dry runs first. So the first child
// the apiserver refuses stops the reply before anything is written — the
// first write needs no dry run of its own, since nothing is written before
// it. Before adopting an orphan, an uncached read confirms the parent still
// exists, is the same object, and is not being deleted.
func (a *Applier) execute(ctx context.Context, ctl *registry.Controller, parent *unstructured.Unstructured, actions []action) (bool, error) {
	if len(actions) == 0 {
		return false, nil
	}
	if slices.ContainsFunc(actions, func(act action) bool { return act.adopt }) {
		if err := a.confirmParent(ctx, ctl, parent); err != nil {
			return false, err
		}
	}
	first, rest := actions[:1], actions[1:]
	if why := a.mayBeRefused(ctx, rest); why != "" {
		a.log.Debug("dry run", "controller", ctl.Name, "parent", objectKey(parent), "uid", parent.GetUID(), "because", why)
		dryCtx, span := a.tracer.Start(ctx, "dry run")
		tracing.SetAttributes(span, func() []attribute.KeyValue { return []attribute.KeyValue{attribute.String("uc.because", why)} })
		_, _, err := a.writeAll(dryCtx, ctl, rest, true)
		tracing.End(span, err)
		if err != nil {
			return false, err
		}
	}
	done, changed, err := a.writeAll(ctx, ctl, first, false)
	if err == nil {
		var more []action
		var moreChanged bool
		more, moreChanged, err = a.writeAll(ctx, ctl, rest, false)
		done, changed = append(done, more...), changed || moreChanged
	}
	// A failed write is reported by the caller: at once when the reply is
	// rejected, once it persists when it is retried.
	a.recordWrites(parent, done)
	return changed, err
}

// writeConcurrency bounds the writes of one reply in flight at once.
const writeConcurrency = 8

// writeAll makes the writes in order of runs: consecutive writes of the same
// verb and resource go at once, a run after the one before it (so a reply
// that lists claims before the Pods that mount them has them created
// first). It returns the writes made, whether any changed an object, and
// the first error.
func (a *Applier) writeAll(ctx context.Context, ctl *registry.Controller, actions []action, dryRun bool) ([]action, bool, error) {
	var done []action
	changed := false
	for len(actions) > 0 {
		n := 1
		for n < len(actions) && actions[n].verb == actions[0].verb && actions[n].child == actions[0].child {
			n++
		}
		run := actions[:n]
		actions = actions[n:]
		results := make([]writeResult, len(run))
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(writeConcurrency)
		for i, act := range run {
			g.Go(func() error {
				var err error
				results[i], err = a.tracedWrite(gctx, ctl, act, dryRun)
				return err
			})
		}
		err := g.Wait()
		for i, act := range run {
			if results[i] != notWritten {
				done = append(done, act)
			}
			changed = changed || results[i] == changedObject
		}
		if err != nil {
			return done, changed, err
		}
	}
	return done, changed, nil
}

// writeResult is what one write did.
type writeResult int

const (
	notWritten    writeResult = iota // it failed
	unchanged                        // the apiserver had nothing to change, or a dry run
	changedObject                    // an object changed: its watch event follows
)

// recordWrites records one Normal Event on the parent for the writes of one
// reply that changed which children it has — created, deleted, recreated,
// adopted, released — as Kubernetes' own controllers record the Pods they
// create and delete, not those they update: its reason is theirs when they
// share one ("Created"), else "Applied"; its message names each child. An
// in-place update is routine (every spec change of the parent makes one per
// child) and shows on the parent's Synced condition; their Events took a
// sixth of the apiserver's CPU in the bench's update of 1000 parents.
func (a *Applier) recordWrites(parent *unstructured.Unstructured, done []action) {
	if reason, message, ok := writesEvent(done); ok {
		a.events.Event(parent, "Normal", reason, message)
	}
}

// writesEvent is the reason and message of the Event recordWrites records
// for the writes done; ok is false when it records none.
func writesEvent(done []action) (reason, message string, ok bool) {
	done = slices.DeleteFunc(slices.Clone(done), func(act action) bool { return act.event == eventUpdated })
	if len(done) == 0 {
		return "", "", false
	}
	reason = done[0].event
	var msg strings.Builder
	for i, act := range done {
		if act.event != reason {
			reason = "Applied"
		}
		if msg.Len() > maxEventMessage {
			fmt.Fprintf(&msg, " and %d more", len(done)-i)
			break
		}
		if i > 0 {
			msg.WriteString(", ")
		}
		fmt.Fprintf(&msg, "%s %s %s", act.event, act.child.GVK.Kind, objectKey(act.obj))
	}
	return reason, msg.String(), true
}

// maxEventMessage bounds the part of an Event message that names children.
const maxEventMessage = 900

func (a *Applier) write(ctx context.Context, ctl *registry.Controller, act action, dryRun bool) (writeResult, error) {
	var dry []string
	if dryRun {
		dry = []string{metav1.DryRunAll}
	}
	res := a.dyn.Resource(act.child.GVR).Namespace(act.obj.GetNamespace())
	result := changedObject
	var err error
	switch act.verb {
	case verbCreate:
		_, err = res.Create(ctx, act.obj, metav1.CreateOptions{FieldManager: v1alpha1.FieldManager(ctl.Name), DryRun: dry})
		if apierrors.IsAlreadyExists(err) {
			err = a.inTheWay(ctx, res, act)
		}
	case verbApply:
		obj := act.obj
		if act.adopt {
			// Adopted as it was judged: a resourceVersion precondition.
			obj = obj.DeepCopy()
			obj.SetResourceVersion(act.liveVersion)
		}
		var out *unstructured.Unstructured
		out, err = res.Apply(ctx, obj.GetName(), obj, metav1.ApplyOptions{FieldManager: v1alpha1.FieldManager(ctl.Name), Force: true, DryRun: dry})
		if err == nil && !dryRun {
			out, err = a.upgradeOwnership(ctx, res, ctl, out, act.obj)
		}
		if err == nil && out.GetResourceVersion() == act.liveVersion {
			result = unchanged
		}
	case verbRelease:
		_, err = res.Patch(ctx, act.obj.GetName(), types.JSONPatchType, releasePatch(act.obj, ctl), metav1.PatchOptions{FieldManager: v1alpha1.FieldManager(ctl.Name), DryRun: dry})
		if apierrors.IsNotFound(err) || apierrors.IsInvalid(err) {
			result, err = unchanged, nil // gone, or changed since: the next sync sees it as it is
		}
	case verbDelete:
		uid := act.obj.GetUID()
		policy := metav1.DeletePropagationBackground
		err = res.Delete(ctx, act.obj.GetName(), metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}, PropagationPolicy: &policy, DryRun: dry})
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			result, err = unchanged, nil // already gone, or replaced by an object that is not ours
		}
	}
	switch {
	case err != nil:
		return notWritten, fmt.Errorf("%s: %w", act, err)
	case dryRun:
		return unchanged, nil
	}
	return result, nil
}

// inTheWay explains an object found where a create was to make a new child:
// the cache had not seen it. uc never takes it over by a create; if the
// parent may adopt it, the retry plans an adoption once the cache has it,
// otherwise the reply is refused.
func (a *Applier) inTheWay(ctx context.Context, res dynamic.ResourceInterface, act action) error {
	cur, err := res.Get(ctx, act.obj.GetName(), metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("read the object in the way: %w", err)
	}
	owner := metav1.GetControllerOfNoCopy(act.obj).UID
	if err := mayManage(cur, owner, act.sel); err != nil {
		return &refusedError{err}
	}
	return errors.New("it exists already, not yet seen by the cache: will adopt it")
}

// upgradeOwnership moves the fields uc owns through a create — an Update
// operation of its field manager — to its server-side apply, and applies obj
// again, so a field dropped from the desired object is removed. out is the
// object as the apply left it. A controller served from Metacontroller's
// API also takes over the fields Metacontroller created and updated.
//
// It is needed only once a field so owned is no longer desired: the apply
// alone cannot remove it. Until then a child created by uc costs one apply
// per update, as one it applied from the start.
func (a *Applier) upgradeOwnership(ctx context.Context, res dynamic.ResourceInterface, ctl *registry.Controller, out, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	manager := v1alpha1.FieldManager(ctl.Name)
	former := sets.New(manager)
	if ctl.Metacontroller {
		former.Insert(registry.MetacontrollerFieldManager)
	}
	if left, err := leftBehind(out, manager, former); err != nil || !left {
		return out, err
	}
	patch, err := csaupgrade.UpgradeManagedFieldsPatch(out, former, manager)
	if err != nil || patch == nil {
		return out, err
	}
	if _, err := res.Patch(ctx, out.GetName(), types.JSONPatchType, patch, metav1.PatchOptions{}); err != nil {
		return nil, fmt.Errorf("upgrade field ownership: %w", err)
	}
	return res.Apply(ctx, obj.GetName(), obj, metav1.ApplyOptions{FieldManager: manager, Force: true})
}

// leftBehind says whether out holds a field that the former managers set
// through an Update operation (a create, or an update of Metacontroller's)
// and manager's apply does not: a field the apply cannot remove.
func leftBehind(out *unstructured.Unstructured, manager string, former sets.Set[string]) (bool, error) {
	applied, updated := &fieldpath.Set{}, &fieldpath.Set{}
	for _, mf := range out.GetManagedFields() {
		var into **fieldpath.Set
		switch {
		case mf.FieldsV1 == nil || mf.Subresource != "":
			continue
		case mf.Manager == manager && mf.Operation == metav1.ManagedFieldsOperationApply:
			into = &applied
		case former.Has(mf.Manager) && mf.Operation == metav1.ManagedFieldsOperationUpdate:
			into = &updated
		default:
			continue
		}
		var set fieldpath.Set
		if err := set.FromJSON(bytes.NewReader(mf.FieldsV1.Raw)); err != nil {
			return false, fmt.Errorf("managed fields of %s: %w", mf.Manager, err)
		}
		*into = (*into).Union(&set)
	}
	// A map or list the apply sets something in is the apply's too: an
	// Update entry keeps owning the map itself ("f:data: {}") once the
	// apply has taken every field in it, and that removes nothing.
	for p := range applied.All() {
		for i := 1; i < len(p); i++ {
			applied.Insert(p[:i].Copy())
		}
	}
	return !updated.Difference(applied).Empty(), nil
}

// refusedError is a write uc refuses to make.
type refusedError struct{ error }

func (e *refusedError) Unwrap() error { return e.error }

// Cache holds the live objects of child resources: the registry's shared
// informers, or any other set of objects.
type Cache interface {
	// Owned lists the objects of a child resource whose controller is
	// owner.
	Owned(gvr schema.GroupVersionResource, namespace string, owner types.UID) ([]*unstructured.Unstructured, error)
	// Orphans lists the objects of a child resource in namespace ("" for
	// all) that no controller owns.
	Orphans(gvr schema.GroupVersionResource, namespace string) ([]*unstructured.Unstructured, error)
	// Object returns an object; namespace is "" for a cluster-scoped one.
	Object(gvr schema.GroupVersionResource, namespace, name string) (*unstructured.Unstructured, error)
}

// cacheLookup reads children from a cache: the registry's shared
// informers.
type cacheLookup struct{ reg Cache }

func (c cacheLookup) owned(ch *registry.Child, namespace string, owner types.UID) ([]*unstructured.Unstructured, error) {
	return c.reg.Owned(ch.GVR, namespace, owner)
}

func (c cacheLookup) orphans(ch *registry.Child, namespace string, sel labels.Selector) ([]*unstructured.Unstructured, error) {
	objs, err := c.reg.Orphans(ch.GVR, namespace)
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for _, u := range objs {
		if registry.Adoptable(sel, u) {
			out = append(out, u)
		}
	}
	return out, nil
}

func (c cacheLookup) get(ch *registry.Child, namespace, name string) (*unstructured.Unstructured, bool) {
	obj, err := c.reg.Object(ch.GVR, namespace, name)
	return obj, err == nil
}
