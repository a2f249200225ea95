package applier

import (
	"context"
	"fmt"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"universalcontroller.dev/uc/core"
	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
)

// A dry-run controller (spec.dryRun) runs through the whole pipeline, and
// its applier plans each reply with the code that applies it, then
// publishes the plan (bus.Plan) instead of writing anything to the
// cluster: no child, no status, no finalizer, no ControllerRevision, and
// no Event either — an Event is a write too, and who switches dryRun on
// expects nothing written. What touches only the bus still happens: the
// fence advances (so the watcher does not take the parent for lost and
// publish it again), apply notices and a reply's resyncAfterSeconds go to
// the watcher, and metrics count the plans as applies.

// dryRun publishes the plan of a reply that would be applied: its
// children's writes (actions), the status with uc's conditions, the
// finalizer and the Events; then advances the fence.
func (rc *reconciler) dryRun(ctx context.Context, parents *knownParents, ctl *core.Controller, parent *unstructured.Unstructured, m bus.Meta,
	resp *hooks.SyncResponse, actions []action, conditions []metav1.Condition) error {
	p := describe(ctl, parent, m, resp, actions, conditions, rc.reg.StatusSchema(ctl.Parent), rc.reg)
	if err := rc.publishPlan(ctx, m, p); err != nil {
		return err
	}
	if resp.ResyncAfterSeconds > 0 {
		rc.resyncAfter(m, resp.ResyncAfterSeconds)
	}
	return rc.advanceFence(ctx, parents, m)
}

// describe is the plan of m's reply resp, planned into actions, with uc's
// conditions: what its writes do to each child (live holds the live
// ones), the parent's status as the schema admits it, when it would be
// written, the finalizer and the Events. It writes nothing.
func describe(ctl *core.Controller, parent *unstructured.Unstructured, m bus.Meta, resp *hooks.SyncResponse, actions []action,
	conditions []metav1.Condition, schema *core.StatusSchema, live Cache) *bus.Plan {
	p := newPlan(m)
	p.Children = Steps(ctl, resp.Children, writes(actions), live)
	status, _, _ := unstructured.NestedMap(parent.Object, "status")
	if next := composeStatus(schema, status, resp.Status, m.Generation, conditions).full; !equalJSON(status, next) {
		p.Status = next
	}
	keep := ctl.Spec.Hooks.Finalize != nil && (m.Hook == hooks.Sync || !resp.Finalized)
	p.Finalizer = finalizerChange(ctl, parent, keep)
	if reason, message, ok := writesEvent(actions); ok {
		p.Events = append(p.Events, bus.PlanEvent{Type: "Normal", Reason: reason, Message: message})
	}
	for _, e := range resp.Events {
		p.Events = append(p.Events, bus.PlanEvent{Type: e.Type, Reason: e.Reason, Message: e.Message})
	}
	p.ResyncAfterSeconds = resp.ResyncAfterSeconds
	return p
}

// newPlan is the plan of m's reply, with nothing planned yet.
func newPlan(m bus.Meta) *bus.Plan {
	return &bus.Plan{Hook: m.Hook, RequestID: m.RequestID, Generation: m.Generation, ResourceVersion: m.ResourceVersion, Children: []bus.Step{}}
}

// rejectDryRun publishes the plan of a reply that would be rejected: the
// reason and message the parent would get, nothing else.
func (rc *reconciler) rejectDryRun(ctx context.Context, m bus.Meta, reason string, problem error) error {
	p := newPlan(m)
	p.Rejected = &bus.Rejected{Reason: reason, Message: problem.Error()}
	return rc.publishPlan(ctx, m, p)
}

// publishPlan publishes a plan on the parent's plan subject, where the
// stream keeps the last one.
func (rc *reconciler) publishPlan(ctx context.Context, m bus.Meta, p *bus.Plan) error {
	e := event.New()
	e.SetID(uuid.NewString())
	e.SetType(bus.PlanType)
	e.SetSource("/universalcontroller/" + m.Controller + "/applier")
	e.SetSubject(m.Key())
	e.SetTime(time.Now())
	if err := e.SetData(event.ApplicationJSON, p); err != nil {
		return fmt.Errorf("encode the plan: %w", err)
	}
	m.Revision = "" // a plan is of the parent, at its latest revision
	m.SetOn(&e)
	bus.InjectTrace(ctx, &e)
	msg, err := bus.ToMsg(ctx, m.PlanSubject(), &e)
	if err != nil {
		return err
	}
	if _, err := rc.js.PublishMsg(ctx, msg, jetstream.WithMsgID(e.ID())); err != nil {
		return fmt.Errorf("publish the plan: %w", err)
	}
	rc.log.Debug("plan published", append(m.LogArgs(), "children", len(p.Children), "rejected", p.Rejected != nil)...)
	return nil
}
