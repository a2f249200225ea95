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
// publishes the plan (bus.plan) instead of writing anything to the
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
	resp *hooks.SyncResponse, actions []core.Write, conditions []metav1.Condition) error {
	p := core.Describe(ctl, parent, m, resp, actions, conditions, rc.reg.StatusSchema(ctl.Parent), rc.reg)
	if err := rc.publishPlan(ctx, m, p); err != nil {
		return err
	}
	if resp.ResyncAfterSeconds > 0 {
		rc.resyncAfter(m, resp.ResyncAfterSeconds)
	}
	return rc.advanceFence(ctx, parents, m)
}

// rejectDryRun publishes the plan of a reply that would be rejected: the
// reason and message the parent would get, nothing else.
func (rc *reconciler) rejectDryRun(ctx context.Context, m bus.Meta, reason string, problem error) error {
	p := core.NewPlan(m)
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
