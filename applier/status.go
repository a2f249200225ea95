package applier

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"go.opentelemetry.io/otel/trace"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"

	"universalcontroller.dev/uc/core"
	"universalcontroller.dev/uc/internal/tracing"
	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

func syncedCondition(generation int64) metav1.Condition {
	return condition(v1alpha1.ConditionSynced, generation, metav1.ConditionTrue, v1alpha1.ReasonApplied, "the latest hook reply was applied")
}

func failedCondition(generation int64, reason, message string) metav1.Condition {
	return condition(v1alpha1.ConditionSynced, generation, metav1.ConditionFalse, reason, message)
}

// condition is one of uc's conditions; setCondition gives it its
// lastTransitionTime.
func condition(typ string, generation int64, status metav1.ConditionStatus, reason, message string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: message, ObservedGeneration: generation}
}

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
	log := rc.log.With("controller", ctl.Name, "parent", objectKey(parent), "uid", parent.GetUID())
	schema := rc.reg.StatusSchema(ctl.Parent)
	live, _, _ := unstructured.NestedMap(parent.Object, "status")
	next := composeStatus(schema, live, status, generation, conds)
	if changes := !equalJSON(live, next.full); changes && len(next.pruned) > 0 {
		rc.events.Eventf(parent, "Warning", "StatusFieldsPruned", "the hook's status has fields the parent's status schema (%s) does not declare, dropped: %s",
			schema.Source, strings.Join(next.pruned, ", "))
	} else if dropped := hookConditionsLeftOut(next.full, conds); changes && len(dropped) > 0 {
		rc.events.Eventf(parent, "Warning", "ConditionsNotWritten", "the parent's status schema (%s) admits no conditions: the hook's conditions %s are not written",
			schema.Source, strings.Join(dropped, ", "))
	}
	if len(next.leftOut) > 0 {
		log.Debug("uc's additions to the status left out", "schema", schema.Source, "fields", next.leftOut)
	}
	written := next.full
	err := rc.applyStatus(ctx, ctl, parent, live, written)
	if refused(err) && !equalJSON(next.full, next.hook) {
		// The apiserver refuses what the schema seemed to admit (an enum, a
		// pattern, a required field), or the schema is unknown: the
		// hook's status alone.
		written = next.hook
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

func equalJSON(a, b map[string]any) bool { return contains(a, b) && contains(b, a) }

// applyStatus writes status unless it equals the live one.
func (rc *reconciler) applyStatus(ctx context.Context, ctl *core.Controller, parent *unstructured.Unstructured, live, status map[string]any) error {
	if equalJSON(live, status) {
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
	if rc.reg.ParentApplied(ctl.Name, parent) && findCondition(written["conditions"], v1alpha1.ConditionSynced)["status"] == nil {
		rc.events.Event(parent, "Normal", v1alpha1.ConditionSynced, synced.Message)
	}
}

// composed is the status uc writes on a parent, against its schema.
type composed struct {
	hook    map[string]any // the hook's status (or the live one), as the schema keeps it
	full    map[string]any // hook with the additions the schema admits
	pruned  []string       // the hook's fields the schema does not declare
	leftOut []string       // uc's additions the schema does not admit
}

// composeStatus works out the status of a parent: the hook's (nil: the
// live one) with observedGeneration (for the hook's) and conds, each kept
// where the schema admits it. An addition the schema admits in part (a
// condition whose item schema is {type, status}) goes in as far as it
// does.
func composeStatus(schema *core.StatusSchema, live, status map[string]any, generation int64, conds []metav1.Condition) composed {
	var c composed
	if status != nil {
		c.hook = runtime.DeepCopyJSON(status)
	} else {
		c.hook = runtime.DeepCopyJSON(live)
		if c.hook == nil {
			c.hook = map[string]any{}
		}
	}
	c.pruned = schema.Prune(c.hook)
	if schema.AdditionsRefused() {
		c.full = c.hook
		return c
	}
	c.full = runtime.DeepCopyJSON(c.hook)
	if generation > 0 { // the generation uc last looked at, whatever the reply
		c.full["observedGeneration"] = generation
	}
	for _, cond := range conds {
		c.full["conditions"] = setCondition(c.full["conditions"], live["conditions"], cond)
	}
	c.leftOut = schema.Prune(c.full)
	return c
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
	if !childChanged || status == nil || k.deferred[uid] || sameHookStatus(live, status) || conditionChanged(live, hookConditions(resp)) {
		delete(k.deferred, uid)
		return false
	}
	k.deferred[uid] = true
	return true
}

// sameHookStatus compares the fields of two statuses that the hook sets
// besides its conditions: all but observedGeneration and conditions.
func sameHookStatus(a, b map[string]any) bool {
	strip := func(m map[string]any) map[string]any {
		out := make(map[string]any, len(m))
		for k, v := range m {
			if k != "observedGeneration" && k != "conditions" {
				out[k] = v
			}
		}
		return out
	}
	a, b = strip(a), strip(b)
	return contains(a, b) && contains(b, a)
}

// hookConditions are the conditions of a reply: those of its status, and
// those it sets (Conditions), as a status holds them.
func hookConditions(resp *hooks.SyncResponse) []any {
	list, _ := resp.Status["conditions"].([]any)
	list = slices.Clone(list)
	for _, c := range resp.Conditions {
		list = append(list, map[string]any{"type": c.Type, "status": c.Status, "reason": c.Reason})
	}
	return list
}

// conditionChanged tells whether one of the hook's conditions has another
// status or reason than the live one of its type, or is new.
func conditionChanged(live map[string]any, conditions []any) bool {
	for _, c := range conditions {
		cond, ok := c.(map[string]any)
		if !ok {
			continue
		}
		old := findCondition(live["conditions"], cond["type"])
		if old == nil || old["status"] != cond["status"] || old["reason"] != cond["reason"] {
			return true
		}
	}
	return false
}

// setCondition sets cond in the conditions list, in the place of the one
// of its type or at its end, with meta.SetStatusCondition: its
// lastTransitionTime is the live condition's of its type, unless its status
// changes (or the live one has none), then now.
//
// The list stays unstructured, not a []metav1.Condition: it is the hook's
// status's (or the live one's), and a CRD's conditions need not be
// metav1.Conditions — one may lack a field metav1.Condition requires, or
// carry fields it does not have (a lastProbeTime, a severity). Read into
// []metav1.Condition and written back, every condition would gain empty
// fields and lose its own. So only cond, with the live condition of its
// type, goes through meta.SetStatusCondition; the other conditions are
// left as they are, and so are the fields of the one cond replaces that
// metav1.Condition does not have.
func setCondition(conditions, live any, cond metav1.Condition) []any {
	var current []metav1.Condition
	if old, ok := asCondition(findCondition(live, cond.Type)); ok && !old.LastTransitionTime.IsZero() {
		current = append(current, old)
	}
	meta.SetStatusCondition(&current, cond)
	set, _ := runtime.DefaultUnstructuredConverter.ToUnstructured(&current[0]) // a metav1.Condition always converts
	list, _ := conditions.([]any)
	out := slices.Clone(list)
	i := slices.IndexFunc(out, func(c any) bool { m, ok := c.(map[string]any); return ok && m["type"] == cond.Type })
	if i < 0 {
		return append(out, set)
	}
	for k, v := range out[i].(map[string]any) {
		if !conditionFields.Has(k) {
			set[k] = v
		}
	}
	out[i] = set
	return out
}

// conditionFields are the fields of a metav1.Condition, as a status holds
// them.
var conditionFields = sets.New("type", "status", "observedGeneration", "lastTransitionTime", "reason", "message")

// asCondition reads a condition of a status as a metav1.Condition; false
// when it is not one.
func asCondition(m map[string]any) (metav1.Condition, bool) {
	var c metav1.Condition
	if m == nil || runtime.DefaultUnstructuredConverter.FromUnstructured(m, &c) != nil {
		return c, false
	}
	return c, true
}

// hookConditionsLeftOut are the types of the hook's conditions among conds
// (all but uc's own) that status, as the schema admits it, lacks.
func hookConditionsLeftOut(status map[string]any, conds []metav1.Condition) []string {
	var out []string
	for _, c := range conds {
		if c.Type != v1alpha1.ConditionSynced && c.Type != v1alpha1.ConditionUpdated && findCondition(status["conditions"], c.Type) == nil {
			out = append(out, c.Type)
		}
	}
	return out
}

func findCondition(conditions, typ any) map[string]any {
	list, _ := conditions.([]any)
	for _, c := range list {
		if m, ok := c.(map[string]any); ok && m["type"] == typ {
			return m
		}
	}
	return nil
}
