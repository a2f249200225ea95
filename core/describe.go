package core

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
)

// Describe is the plan of m's reply resp, planned into actions, with uc's
// conditions: what its writes do to each child (live holds the live
// ones), the parent's status as the schema admits it, when it would be
// written, the finalizer and the Events. It writes nothing.
func Describe(ctl *Controller, parent *unstructured.Unstructured, m bus.Meta, resp *hooks.SyncResponse, actions []Write,
	conditions []metav1.Condition, schema *StatusSchema, live Cache) *bus.Plan {
	p := NewPlan(m)
	p.Children = Steps(ctl, resp.Children, actions, live)
	status, _, _ := unstructured.NestedMap(parent.Object, "status")
	if next := ComposeStatus(schema, status, resp.Status, m.Generation, conditions).Full; !EqualJSON(status, next) {
		p.Status = next
	}
	keep := ctl.Spec.Hooks.Finalize != nil && (m.Hook == hooks.Sync || !resp.Finalized)
	p.Finalizer = FinalizerChange(ctl, parent, keep)
	if reason, message, ok := WritesEvent(actions); ok {
		p.Events = append(p.Events, bus.PlanEvent{Type: "Normal", Reason: reason, Message: message})
	}
	for _, e := range resp.Events {
		p.Events = append(p.Events, bus.PlanEvent{Type: e.Type, Reason: e.Reason, Message: e.Message})
	}
	p.ResyncAfterSeconds = resp.ResyncAfterSeconds
	return p
}

// NewPlan is the plan of m's reply, with nothing planned yet.
func NewPlan(m bus.Meta) *bus.Plan {
	return &bus.Plan{Hook: m.Hook, RequestID: m.RequestID, Generation: m.Generation, ResourceVersion: m.ResourceVersion, Children: []bus.Step{}}
}

// FinalizerChange is what setting uc's finalizer on the parent to want
// changes: "add", "remove", or "" when nothing (it is as wanted, or the
// parent is being deleted: a finalizer is never added then).
func FinalizerChange(ctl *Controller, parent *unstructured.Unstructured, want bool) string {
	has := slices.Contains(parent.GetFinalizers(), ctl.Finalizer())
	switch {
	case want == has, want && parent.GetDeletionTimestamp() != nil:
		return ""
	case want:
		return "add"
	}
	return "remove"
}

// WritesEvent is the reason and message of the Event recordWrites records
// for the writes done; ok is false when it records none.
func WritesEvent(done []Write) (reason, message string, ok bool) {
	done = slices.DeleteFunc(slices.Clone(done), func(act Write) bool { return act.Event == EventUpdated })
	if len(done) == 0 {
		return "", "", false
	}
	reason = done[0].Event
	var msg strings.Builder
	for i, act := range done {
		if act.Event != reason {
			reason = "Applied"
		}
		if msg.Len() > MaxEventMessage {
			fmt.Fprintf(&msg, " and %d more", len(done)-i)
			break
		}
		if i > 0 {
			msg.WriteString(", ")
		}
		fmt.Fprintf(&msg, "%s %s %s", act.Event, act.Child.GVK.Kind, ObjectKey(act.Object))
	}
	return reason, msg.String(), true
}

// MaxEventMessage bounds the part of an Event message that names children.
const MaxEventMessage = 900
