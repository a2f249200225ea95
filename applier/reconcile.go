package applier

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/record"

	"universalcontroller.dev/uc/core"
	"universalcontroller.dev/uc/internal/shares"
	"universalcontroller.dev/uc/internal/tracing"
	"universalcontroller.dev/uc/internal/verdict"
	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// reconciler applies one parent at a time, as intake hands it a batch of
// replies: it finds the controller in the registry and the parent, drops a
// reply older than the one last applied (the fence, fence.go), decodes the
// replies (decode.go), works out a rollout's step and saves its revisions
// (rollout.go, metacontroller.go), plans the children's writes (plan.go)
// and has the writer make them, writes the parent's status (status.go) and
// finalizer (parent.go), records the hook's Events (feedback.go), and
// advances the fence. A reply that cannot be applied is rejected whole
// (reject), one that keeps failing is reported on the parent
// (reportFailing). A decorator's reply goes to the decorated object
// (decorator.go); a dry-run controller's is planned and published, not
// written (dryrun.go); a sync hook's shadow's is compared, never applied
// (shadow.go).
type reconciler struct {
	reg            Registry
	dyn            dynamic.Interface
	js             jetstream.JetStream
	events         record.EventRecorder
	hookEvents     record.EventRecorder // Options.HookEvents
	maxChildren    int                  // Options.MaxChildren
	observer       Observer
	shadowObserver ShadowObserver
	log            *slog.Logger
	tracer         trace.Tracer
	fence          *kvFence // made by Run
	writer         *writer
	// failures counts the applies of the parent with that apply key that
	// failed in a row: intake's, whose queue retries them.
	failures func(key types.UID) int

	decorated decorations // what decorators last wrote to decorated objects
	failing   failing     // the failures reported on parents whose apply is retried
	shadows   *shadows    // the replies of sync hooks' shadows, waiting for the sync hooks'
	waiting   sync.Map    // controllers whose replies waited for the registry, said once each
}

// apply makes the cluster match a batch of replies of one parent, as
// intake hands it over (parentApplier): it tells the watcher that the apply
// starts and ends, and applies in a span that continues the trace of the
// batch's latest reply. A panic of the apply ends the span with an error,
// and goes on to the worker loop, which recovers it.
func (rc *reconciler) apply(ctx context.Context, parents *knownParents, b *batch) (err error) {
	log := rc.log.With(b.meta.LogArgs()...)
	log.Debug("apply", "phase", "start", "at", time.Now().UnixNano())
	rc.announce(b.meta, false, nil)
	ctx, wrote := withWrote(ctx)
	defer func() {
		rc.announce(b.meta, true, wrote.all())
		end := []any{"phase", "end", "at", time.Now().UnixNano()}
		if until, closed := writableUntil(ctx); closed {
			// The replica was paused or cut off past its hold: the apply
			// wrote nothing after its gate closed.
			end = append(end, "writable_until", until.UnixNano())
		}
		log.Debug("apply", end...)
	}()
	ctx, span := rc.traceApply(ctx, b)
	defer endApply(span, &err)
	if err = rc.applyReplies(ctx, parents, b); err != nil {
		return failedApply(ctx, log, err)
	}
	rc.failing.forget(b.meta.ApplyKey())
	return nil
}

// failedApply is the error of an apply that failed with err, as the worker
// loop reads its verdict: none when a newer observation was applied
// meanwhile (the fence moved: the reply is dropped), a wait when the world
// moved on (movedOn, logged as news), err otherwise. An apply that failed
// as this replica's hold lapsed says so.
func failedApply(ctx context.Context, log *slog.Logger, err error) error {
	if errors.Is(err, errFenceMoved) {
		log.Info("a newer observation was applied meanwhile; reply dropped", "err", err)
		return nil
	}
	if cause := context.Cause(ctx); errors.Is(cause, shares.ErrHoldLost) {
		err = fmt.Errorf("%w (%w)", err, cause)
	}
	if movedOn(err) {
		log.Info("the apply met a newer state; will retry against it", "err", err)
		return verdict.Wait.Mark(err)
	}
	return err
}

// errNotRegisteredYet is a reply of a controller that another role of uc
// registered before this replica did. It waits (verdict.Wait), no failure:
// this replica's registry catches up with the controller soon (after a
// restart, with every parent at once).
var errNotRegisteredYet = verdict.Wait.Mark(errors.New("not registered here yet"))

// applyReplies makes the cluster match the replies of one observation of a
// parent. It is idempotent.
func (rc *reconciler) applyReplies(ctx context.Context, parents *knownParents, b *batch) error {
	r := b.latest()
	m := r.meta
	log := rc.log.With(append(m.LogArgs(), "hook", m.Hook, "observation", m.Observation)...)
	ctl, ok := rc.reg.Get(m.Controller)
	if !ok && rc.reg.MayExist(m.Controller) {
		// Another role registered it first: the reply waits for this one,
		// said once per controller (after a restart, every parent waits).
		if _, said := rc.waiting.LoadOrStore(m.Controller, true); !said {
			log.Debug("replies wait for the controller to be registered here")
		}
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
	last, err := rc.lastApplied(ctx, parents, m.ApplyKey())
	if err != nil {
		return err
	}
	if m.Observation < last.observation {
		log.Debug("dropping a reply older than one already applied")
		return nil
	}
	return rc.kindOf(ctl).apply(ctx, parents, ctl, b, log)
}

// applyToParent applies a UniversalController's replies to its parent.
func (rc *reconciler) applyToParent(ctx context.Context, parents *knownParents, ctl *core.Controller, b *batch, log *slog.Logger) error {
	r := b.latest()
	parent, err := rc.parent(ctx, ctl, r.meta)
	if err != nil || parent == nil {
		parents.forget(r.meta.ApplyKey())
		return err
	}
	if err := rc.applyTo(ctx, parents, ctl, parent, b, log); err != nil {
		rc.reportFailing(ctx, log, ctl, parent, r.meta, err, true)
		return err
	}
	rc.syncReplied(ctl, r)
	return nil
}

// applyTo makes the parent's children, status and finalizer match the
// replies of the batch, and advances the fence.
func (rc *reconciler) applyTo(ctx context.Context, parents *knownParents, ctl *core.Controller, parent *unstructured.Unstructured, b *batch, log *slog.Logger) error {
	m := b.latest().meta
	if f := b.failure(); f != nil {
		reason, problem := decodeFailure(f)
		return rc.reject(ctx, log, ctl, parent, m, reason, problem)
	}
	planCtx, span := rc.tracer.Start(ctx, "plan")
	replies, err := b.decode(ctl.Spec.Hooks.Named(m.Hook).StrictReplies(), rc.maxChildren)
	resp := replies[m.LatestRevision()]
	var ro *core.Rollout
	if err == nil && ctl.Rolling() {
		if ro, err = rc.rollout(planCtx, ctl, parent, m, replies); err != nil {
			tracing.End(span, err)
			return err
		}
		step := *resp
		step.Children = ro.Children
		resp = &step
	}
	var actions []core.Write
	if err == nil {
		actions, err = core.Plan(ctl, parent, resp, rc.reg)
	}
	tracing.SetAttributes(span, func() []attribute.KeyValue { return []attribute.KeyValue{attribute.Int("uc.writes", len(actions))} })
	tracing.End(span, err)
	if err != nil {
		reason, problem := core.InvalidReply(m.Hook, err)
		return rc.reject(ctx, log, ctl, parent, m, reason, problem)
	}
	conditions := core.ReplyConditions(resp, m.Generation)
	if ro != nil {
		actions = ro.KeepOnly(actions)
		conditions = append(conditions, ro.Condition(m.Generation))
	}
	return rc.sinkOf(ctl).apply(ctx, parents, ctl, parent, m, planned{resp, ro, actions, conditions}, log)
}

// parent returns the parent the reply is for, or nil when it is gone or was
// replaced by another object of the same name. A replica's cache can lag
// behind the watcher's (another replica's, or a parent just created): when
// the cache does not have the parent the reply names, the apiserver decides.
func (rc *reconciler) parent(ctx context.Context, ctl *core.Controller, m bus.Meta) (*unstructured.Unstructured, error) {
	p, err := rc.reg.Object(ctl.Parent.GVR, m.Namespace, m.Name)
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, err
	}
	if err == nil && p.GetUID() == m.ParentUID {
		return p, nil
	}
	p, err = rc.dyn.Resource(ctl.Parent.GVR).Namespace(m.Namespace).Get(ctx, m.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, rc.fence.forget(ctx, m.ApplyKey())
	case err != nil:
		return nil, fmt.Errorf("read parent %s: %w", m.Key(), err)
	case p.GetUID() != m.ParentUID:
		return nil, nil
	}
	return p, nil
}

// reject reports a reply that cannot be applied on the parent — a Warning
// Event and a Synced=False condition naming the problem — and touches
// nothing else.
func (rc *reconciler) reject(ctx context.Context, log *slog.Logger, ctl *core.Controller, parent *unstructured.Unstructured, m bus.Meta, reason string, problem error) error {
	logRejected(log, reason, problem)
	rc.observer.Rejected(m, reason)
	return rc.sinkOf(ctl).reject(ctx, ctl, parent, m, reason, problem)
}

// logRejected logs a rejected reply: an error of uc's or the apiserver's
// finding, or, for the report of a hook that failed (HookFailed), a
// warning: the hook's failure was logged as an error where it failed.
func logRejected(log *slog.Logger, reason string, problem error) {
	level := slog.LevelError
	if reason == v1alpha1.ReasonHookFailed {
		level = slog.LevelWarn
	}
	log.Log(context.Background(), level, "reply rejected", "reason", reason, "err", problem)
}

// warn records a Warning Event on obj about a sync that failed. For a
// controller served from Metacontroller's API its reason is Metacontroller's
// own, SyncError, with uc's reason leading the message, so that what
// watched Metacontroller's Events (alerts, `kubectl get events
// --field-selector reason=SyncError`) still sees them.
func (rc *reconciler) warn(ctl *core.Controller, obj *unstructured.Unstructured, reason, message string) {
	if ctl.Metacontroller {
		reason, message = v1alpha1.ReasonSyncError, "Sync error: "+reason+": "+message
	}
	rc.events.Event(obj, "Warning", reason, message)
}

// movedOn tells an apply that stopped because the world moved on since
// its reply was planned: an object it was to write changed meanwhile (a
// conflict of its resourceVersion precondition), one it was to create
// exists already (errNotCachedYet), or this replica no longer applies the
// parent (superseded). It is logged as news, not as an error,
// and waits (verdict.Wait): retried against the newer state (in a new
// hold), or superseded by the request that the change causes. A conflict
// that persists — another writer fighting over the same fields — is
// reported as failures are (reportFailing).
func movedOn(err error) bool {
	return apierrors.IsConflict(err) || errors.Is(err, errNotCachedYet) || superseded(err)
}

// superseded tells an apply that stopped because this replica's hold on
// the partition lapsed, or another apply advanced the fence: it is never
// reported on the parent, which another apply now serves.
func superseded(err error) bool {
	return errors.Is(err, shares.ErrHoldLost) || errors.Is(err, errFenceMoved)
}

// reportAfterFailures is the number of failed applies in a row after which
// a failure that is retried is reported on the parent: a failure that
// persists reaches the parent's user, a passing one (a conflict, a
// restarting apiserver) does not.
const reportAfterFailures = 3

// reportFailing reports on the parent an apply that keeps failing and is
// retried — a Warning Event ApplyFailed and, with condition (a controller's
// parent, not a decorated object), a Synced=False condition, both naming the error — once it failed
// reportAfterFailures times in a row. A failure already reported is not
// reported again: the Event once per distinct error, the condition once
// per distinct error and generation; the next apply that succeeds sets
// Synced=True.
func (rc *reconciler) reportFailing(ctx context.Context, log *slog.Logger, ctl *core.Controller, parent *unstructured.Unstructured, m bus.Meta, err error, condition bool) {
	key := m.ApplyKey()
	if rc.failures(key)+1 < reportAfterFailures || !rc.sinkOf(ctl).writesParent() || superseded(err) {
		return // a dry-run controller's parents are not written to, not even to say so
	}
	message := fmt.Sprintf("the apply keeps failing; uc retries it with backoff: %v", err)
	newError, newGeneration := rc.failing.report(key, message, m.Generation)
	if newError {
		log.Warn("apply keeps failing; reported on the parent", "err", err)
		rc.warn(ctl, parent, v1alpha1.ReasonApplyFailed, message)
	}
	if !newError && !newGeneration || !condition {
		return // uc adds no condition to a decorated object
	}
	if err := rc.writeStatus(ctx, ctl, parent, nil, m.Generation, core.FailedCondition(m.Generation, v1alpha1.ReasonApplyFailed, message)); err != nil {
		log.Warn("report a failing apply in the parent's status; will retry", "err", err)
		rc.failing.forget(key)
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
