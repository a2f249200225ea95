package hooks

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// A sync or finalize reply may speak back to the parent's user: Events
// recorded on the parent, and conditions set in its status.conditions.

// Event is an Event a reply asks uc to record on the parent, as a
// Kubernetes Event whose involved object is the parent.
type Event struct {
	// Type is Normal or Warning.
	Type string `json:"type"`
	// Reason is a short word, CamelCase by convention, that Events of the
	// same cause share: uc rate-limits a parent's Events per reason.
	Reason string `json:"reason"`
	// Message is for humans.
	Message string `json:"message,omitempty"`
}

// Condition is a condition a reply sets in the parent's status.conditions,
// with the meaning of Kubernetes' metav1.Condition: uc adds its
// observedGeneration (the generation the hook saw) and lastTransitionTime
// (when its status last changed).
type Condition struct {
	// Type names the condition, e.g. Ready or example.com/Degraded; it may
	// not be one of uc's own conditions (ConditionSynced,
	// ConditionUpdated).
	Type string `json:"type"`
	// Status is True, False or Unknown.
	Status string `json:"status"`
	// Reason is a CamelCase word saying why the condition has its status.
	Reason string `json:"reason"`
	// Message is for humans.
	Message string `json:"message,omitempty"`
}

// uc's own conditions on a parent, which no reply may set.
const (
	// ConditionSynced says whether the latest hook reply was applied.
	ConditionSynced = "Synced"
	// ConditionUpdated says how far a rolling update got.
	ConditionUpdated = "Updated"
)

// The bounds of what a reply says back; a reply beyond them is invalid.
const (
	// MaxEvents and MaxConditions bound the events and conditions of one
	// reply.
	MaxEvents     = 16
	MaxConditions = 16
	// MaxEventReason and MaxEventMessage bound an event's reason and
	// message, in bytes, as Kubernetes' events.k8s.io API does.
	MaxEventReason  = 128
	MaxEventMessage = 1024
)

// EventTypes are the types an event may have.
var EventTypes = []string{"Normal", "Warning"}

// validateEvents checks a reply's events against the bounds above: a
// type of EventTypes, a reason that is neither empty nor too long, a
// message that is not too long.
func validateEvents(events []Event) field.ErrorList {
	path := field.NewPath("events")
	if len(events) > MaxEvents {
		return field.ErrorList{field.TooMany(path, len(events), MaxEvents)}
	}
	var errs field.ErrorList
	for i, e := range events {
		at := path.Index(i)
		if !slices.Contains(EventTypes, e.Type) {
			errs = append(errs, field.NotSupported(at.Child("type"), e.Type, EventTypes))
		}
		switch {
		case e.Reason == "":
			errs = append(errs, field.Required(at.Child("reason"), ""))
		case len(e.Reason) > MaxEventReason:
			errs = append(errs, field.TooLong(at.Child("reason"), e.Reason, MaxEventReason))
		}
		if len(e.Message) > MaxEventMessage {
			errs = append(errs, field.TooLong(at.Child("message"), e.Message, MaxEventMessage))
		}
	}
	return errs
}

// validateConditions checks a reply's conditions with Kubernetes' own
// validation of metav1.Condition (a qualified name for a type, each type
// once, a status of True, False or Unknown, a CamelCase reason, a message
// of at most 32 KiB), and that none is one of uc's own.
func validateConditions(conditions []Condition) field.ErrorList {
	path := field.NewPath("conditions")
	if len(conditions) > MaxConditions {
		return field.ErrorList{field.TooMany(path, len(conditions), MaxConditions)}
	}
	var errs field.ErrorList
	for i, c := range conditions {
		if c.Type == ConditionSynced || c.Type == ConditionUpdated {
			errs = append(errs, field.Forbidden(path.Index(i).Child("type"), c.Type+" is uc's own condition: a hook may not set it"))
		}
	}
	// uc sets the time; the validation requires one.
	now := metav1.Now()
	return append(errs, metav1validation.ValidateConditions(MetaConditions(conditions, 0, now), path)...)
}

// MetaConditions are a reply's conditions as metav1.Conditions at the
// parent's generation, with the given lastTransitionTime (zero: none).
func MetaConditions(conditions []Condition, generation int64, transition metav1.Time) []metav1.Condition {
	out := make([]metav1.Condition, len(conditions))
	for i, c := range conditions {
		out[i] = metav1.Condition{Type: c.Type, Status: metav1.ConditionStatus(c.Status), Reason: c.Reason, Message: c.Message,
			ObservedGeneration: generation, LastTransitionTime: transition}
	}
	return out
}
