package applier

import (
	"context"
	"log/slog"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"universalcontroller.dev/uc/core"
	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// A sink is where the decisions on a parent's replies go: the cluster, or,
// for a dry-run controller, the plan the applier publishes on the bus
// instead (see dryrun.go). The reconciler decides the same either way; the
// controller's sink is chosen in one place, sinkOf.
type sink interface {
	// apply carries out the plan of a parent's replies.
	apply(ctx context.Context, parents *knownParents, ctl *core.Controller, parent *unstructured.Unstructured, m bus.Meta, p planned, log *slog.Logger) error
	// reject reports a reply that cannot be applied.
	reject(ctx context.Context, ctl *core.Controller, parent *unstructured.Unstructured, m bus.Meta, reason string, problem error) error
	// writesParent tells whether the parent hears more than its plans: a
	// failure that persists, a shadow's difference.
	writesParent() bool
}

// planned is a parent's replies as the core planned them.
type planned struct {
	resp *hooks.SyncResponse
	// ro is the rollout's step, nil for a controller that does not roll
	// its children out.
	ro         *core.Rollout
	writes     []core.Write
	conditions []metav1.Condition
}

// sinkOf is the sink of a controller's decisions.
func (rc *reconciler) sinkOf(ctl *core.Controller) sink {
	if ctl.DryRun() {
		return planSink{rc}
	}
	return clusterSink{rc}
}

// clusterSink writes a parent's plan to the cluster.
type clusterSink struct{ *reconciler }

func (s clusterSink) writesParent() bool { return true }

// apply writes the rollout's progress, the children, the status and the
// finalizer, asks the watcher for a resync the hook wants, advances the
// fence and records the hook's Events.
func (s clusterSink) apply(ctx context.Context, parents *knownParents, ctl *core.Controller, parent *unstructured.Unstructured, m bus.Meta, p planned, log *slog.Logger) error {
	if p.ro != nil {
		// The rollout's progress is saved before any child is touched.
		if err := s.saveRevisions(ctx, p.ro); err != nil {
			return err
		}
		parents.rolled(m.ApplyKey(), ctl, p.ro)
	}
	writes, held := parents.holdRecreateLoops(m.ApplyKey(), p.writes, s.reg)
	if loop := s.reportRecreateLoops(ctl, parent, held, log); loop != "" {
		p.conditions = withSynced(p.conditions, core.FailedCondition(m.Generation, v1alpha1.ReasonRecreateLoop, loop))
	}
	changed, err := s.writer.execute(ctx, ctl, parent, writes)
	if err != nil {
		if reason, problem := classify(m.Hook, err); problem != nil {
			return s.reconciler.reject(ctx, log, ctl, parent, m, reason, problem)
		}
		return err
	}
	resp := p.resp
	if parents.deferStatus(parent, resp, changed) {
		log.Debug("status left to the sync that follows the children's change")
	} else if err := s.writeStatus(ctx, ctl, parent, resp.Status, m.Generation, p.conditions...); err != nil {
		return err
	}
	// The finalizer stays while a finalize hook exists and has not said
	// finalized.
	keep := ctl.Spec.Hooks.Finalize != nil && (m.Hook == hooks.Sync || !resp.Finalized)
	if err := s.setFinalizer(ctx, ctl, parent, keep); err != nil {
		return err
	}
	if resp.ResyncAfterSeconds > 0 {
		s.resyncAfter(m, resp.ResyncAfterSeconds)
	}
	log.Debug("applied", "writes", len(p.writes))
	if err := s.advanceFence(ctx, parents, m); err != nil {
		return err
	}
	s.recordHookEvents(parent, resp.Events)
	return nil
}

// reject records a Warning Event on the parent and sets its Synced
// condition to False, naming the problem.
func (s clusterSink) reject(ctx context.Context, ctl *core.Controller, parent *unstructured.Unstructured, m bus.Meta, reason string, problem error) error {
	s.warn(ctl, parent, reason, problem.Error())
	return s.writeStatus(ctx, ctl, parent, nil, m.Generation, core.FailedCondition(m.Generation, reason, problem.Error()))
}

// planSink publishes a dry-run controller's plans (dryrun.go).
type planSink struct{ *reconciler }

// writesParent is false: a dry-run controller's parents are not written
// to, not even to report a failure.
func (s planSink) writesParent() bool { return false }

func (s planSink) apply(ctx context.Context, parents *knownParents, ctl *core.Controller, parent *unstructured.Unstructured, m bus.Meta, p planned, _ *slog.Logger) error {
	return s.dryRun(ctx, parents, ctl, parent, m, p.resp, p.writes, p.conditions)
}

func (s planSink) reject(ctx context.Context, _ *core.Controller, _ *unstructured.Unstructured, m bus.Meta, reason string, problem error) error {
	return s.rejectDryRun(ctx, m, reason, problem)
}
