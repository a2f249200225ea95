package core

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
)

// Check is what the applier would do with one reply of a controller's
// sync or finalize hook for a parent, without writing anything (`uc
// render`): the reply decoded and checked by the applier's rules, and the
// writes its plan would make against the live children in live.
//
// For a controller that rolls its children out, the plan is the one of a
// parent whose children are all on its latest revision: the rollout that
// moves them one at a time is not planned.
func Check(ctl *Controller, parent *unstructured.Unstructured, hook string, reply []byte, maxChildren int, live Cache) (*Checked, error) {
	resp, err := DecodeSync(hook, reply, ctl.Spec.Hooks.Named(hook).StrictReplies(), maxChildren)
	var actions []Write
	if err == nil {
		actions, err = Plan(ctl, parent, resp, live)
	}
	if err != nil {
		return nil, rejected(hook, err)
	}
	m := bus.Meta{Address: bus.Address{Controller: ctl.Name, Hook: hook, ParentUID: parent.GetUID()},
		Namespace: parent.GetNamespace(), Name: parent.GetName(), Generation: parent.GetGeneration(), ResourceVersion: parent.GetResourceVersion()}
	Plan := Describe(ctl, parent, m, resp, actions, ReplyConditions(resp, m.Generation), &StatusSchema{}, live)
	return &Checked{Response: resp, Writes: actions, Plan: Plan}, nil
}

// CheckDecoration is Check for a decorator's reply about an object it
// decorates; ctl is the decorator's view for the object's resource
// (Controller.Decorating).
func CheckDecoration(ctl *Controller, obj *unstructured.Unstructured, hook string, reply []byte, maxChildren int, live Cache) (*CheckedDecoration, error) {
	resp, actions, err := PlanDecoration(ctl, obj, hook, reply, maxChildren, live)
	if err != nil {
		return nil, rejected(hook, err)
	}
	return &CheckedDecoration{Response: resp, Writes: actions}, nil
}

// CheckedDecoration is a decorator's reply the applier would apply.
type CheckedDecoration struct {
	// Response is the reply; its attachments are the objects the applier
	// would write.
	Response *hooks.DecoratorResponse
	// Writes are the writes that make the live attachments match it.
	Writes []Write
}

func rejected(hook string, err error) *Rejection {
	reason, problem := InvalidReply(hook, err)
	return &Rejection{Reason: reason, Message: problem.Error()}
}

// Checked is a reply the applier would apply.
type Checked struct {
	// Response is the reply; its children are the objects the applier
	// would write: in the parent's namespace, controlled by the parent,
	// labelled and annotated as uc applies them.
	Response *hooks.SyncResponse
	// Writes are the writes that make the live children match it, in
	// order.
	Writes []Write
	// Plan is the plan a dry-run controller's applier would publish for
	// it, the status as an unknown schema admits it.
	Plan *bus.Plan
}

// HookFailed is the rejection of the reply a hook could not give: how the
// parent reports the failure.
func HookFailed(hook string, f bus.Failure) *Rejection {
	reason, problem := Failed(hook, f)
	return &Rejection{Reason: reason, Message: problem.Error()}
}

// Rejection is a reply the applier would not apply, as the parent reports
// it: the reason and message of its Warning Event and of its Synced=False
// condition (a decorated object gets the Event alone).
type Rejection struct {
	Reason  string
	Message string
	// Decorated tells an object a decorator decorates, which gets the
	// Event alone.
	Decorated bool
}

func (r *Rejection) Error() string { return r.Reason + ": " + r.Message }
