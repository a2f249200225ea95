package applier

import (
	"context"
	"fmt"
	"strings"

	"go.opentelemetry.io/otel/trace"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"universalcontroller.dev/uc/core"
	"universalcontroller.dev/uc/internal/tracing"
	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// writeStatus sets the parent's status with server-side apply: the hook's
// status, or — when status is nil — the live status unchanged, with uc's
// additions: observedGeneration and conds, its conditions (Synced, and
// Updated for a rollout) and those of the hook's reply. The parent's status
// schema decides what goes in, as the apiserver would prune it: a field of
// the hook's it does not declare is dropped (and named in a Warning
// Event), an addition it does not admit is left out (the hook's conditions
// named in a Warning Event; a parent that recovers from a failure gets a
// Normal Event instead of its Synced condition). A status the apiserver refuses all the
// same is written again without uc's additions, then reported — a Warning
// Event with the apiserver's answer, the parent counted as failing on its
// UniversalController — and not retried: it never fails the apply. It
// writes nothing when the result equals the live status.
func (rc *reconciler) writeStatus(ctx context.Context, ctl *core.Controller, parent *unstructured.Unstructured, status map[string]any, generation int64, conds ...metav1.Condition) error {
	log := rc.log.With("controller", ctl.Name, "parent", core.ObjectKey(parent), "uid", parent.GetUID())
	schema := rc.reg.StatusSchema(ctl.Parent)
	live, _, _ := unstructured.NestedMap(parent.Object, "status")
	next := core.ComposeStatus(schema, live, status, generation, conds)
	if changes := !core.EqualJSON(live, next.Full); changes && len(next.Pruned) > 0 {
		rc.events.Eventf(parent, "Warning", "StatusFieldsPruned", "the hook's status has fields the parent's status schema (%s) does not declare, dropped: %s",
			schema.Source, strings.Join(next.Pruned, ", "))
	} else if dropped := core.HookConditionsLeftOut(next.Full, conds); changes && len(dropped) > 0 {
		rc.events.Eventf(parent, "Warning", "ConditionsNotWritten", "the parent's status schema (%s) admits no conditions: the hook's conditions %s are not written",
			schema.Source, strings.Join(dropped, ", "))
	}
	if len(next.LeftOut) > 0 {
		log.Debug("uc's additions to the status left out", "schema", schema.Source, "fields", next.LeftOut)
	}
	written := next.Full
	err := rc.applyStatus(ctx, ctl, parent, live, written)
	if refused(err) && !core.EqualJSON(next.Full, next.Hook) {
		// The apiserver refuses what the schema seemed to admit (an enum, a
		// pattern, a required field), or the schema is unknown: the
		// hook's status alone.
		written = next.Hook
		if err = rc.applyStatus(ctx, ctl, parent, live, written); err == nil {
			log.Info("uc's additions to the status refused; writing the hook's status alone", "schema", schema.Source)
			schema.RefuseAdditions()
		}
	}
	switch {
	case refused(err):
		rc.events.Eventf(parent, "Warning", "StatusWriteFailed", "%v", err)
		rc.reg.ParentFailed(ctl.Name, parent, "StatusWriteFailed", err.Error())
		log.Error("status refused; not retried", "err", err)
		return nil
	case err != nil:
		return err
	}
	rc.reportSynced(ctl, parent, written, conds)
	return nil
}

// refused tells the apiserver's refusal of a status, which the same write
// again would meet: invalid, forbidden, or a field its server-side apply
// cannot type (no status code of its own: it answers 500).
func refused(err error) bool {
	return err != nil && (apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) || apierrors.IsForbidden(err) || untypable(err))
}

// applyStatus writes status unless it equals the live one.
func (rc *reconciler) applyStatus(ctx context.Context, ctl *core.Controller, parent *unstructured.Unstructured, live, status map[string]any) error {
	if core.EqualJSON(live, status) {
		return nil
	}
	if err := mayWrite(ctx); err != nil {
		return err
	}
	ctx, span := rc.tracer.Start(ctx, "status", trace.WithSpanKind(trace.SpanKindClient))
	obj := parentConfig(ctx, ctl.Parent.GVR, parent)
	obj.Object["status"] = status
	out, err := rc.dyn.Resource(ctl.Parent.GVR).Namespace(parent.GetNamespace()).
		ApplyStatus(ctx, parent.GetName(), obj, metav1.ApplyOptions{FieldManager: v1alpha1.FieldManager(ctl.Name), Force: true})
	tracing.End(span, err)
	if err != nil {
		return fmt.Errorf("write status: %w", err)
	}
	noteWritten(ctx, ctl.Parent.GVR, out)
	return nil
}

// reportSynced tells the registry whether the parent is failing, from uc's
// Synced condition, and records a Normal Event when it recovers from a
// failure while its status has no room for the condition: the Warning that
// reported the failure is not the last word.
func (rc *reconciler) reportSynced(ctl *core.Controller, parent *unstructured.Unstructured, written map[string]any, conds []metav1.Condition) {
	synced := meta.FindStatusCondition(conds, v1alpha1.ConditionSynced)
	if synced == nil {
		return
	}
	if synced.Status != metav1.ConditionTrue {
		rc.reg.ParentFailed(ctl.Name, parent, synced.Reason, synced.Message)
		return
	}
	if rc.reg.ParentApplied(ctl.Name, parent) && core.FindCondition(written["conditions"], v1alpha1.ConditionSynced)["status"] == nil {
		rc.events.Event(parent, "Normal", v1alpha1.ConditionSynced, synced.Message)
	}
}

// deferStatus tells whether the status of a reply is better left to the
// sync that follows it. It is when the apply changed a child — the watcher
// sees the change and calls the hook again — and the hook's status differs
// from the live one, most likely because it reports what it observed, which
// the apply just changed: written now, it would be replaced by the next
// reply's, and its own watch event would cost one more hook call. A status
// is written at once when the hook left it as it was (only
// observedGeneration and uc's conditions move, and the next reply will not
// change them), and when one of the hook's conditions changes: a condition
// records a transition (a job Restarting), which the next reply may already
// have left behind; so is one whose reply sets a condition that changes.
// A parent's status is deferred at most once in a row, so a hook that
// changes a child on every call still gets its status written.
func (k *knownParents) deferStatus(parent *unstructured.Unstructured, resp *hooks.SyncResponse, childChanged bool) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	uid := parent.GetUID()
	live, _ := parent.Object["status"].(map[string]any)
	status := resp.Status
	if !childChanged || status == nil || k.deferred[uid] || core.SameHookStatus(live, status) || core.ConditionChanged(live, core.HookConditions(resp)) {
		delete(k.deferred, uid)
		return false
	}
	k.deferred[uid] = true
	return true
}
