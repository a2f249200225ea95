package bus

import "time"

// PlanStream holds the last plan of each parent of a dry-run controller
// (spec.dryRun), and of each parent's sync hook's shadow: one message per
// subject, kept PlanMaxAge.
const PlanStream = "UC_PLANS"

// PlanPrefix is the prefix of plans:
//
//	uc.plan.<controller>.<hook>.<partition>.<parent-uid>
//
// the tokens as a reply's, the hook the one whose reply was planned.
const PlanPrefix = "uc.plan"

// PlanMaxAge bounds how long a plan stays in PlanStream: a parent whose
// controller no longer runs dry leaves no plan behind for long.
const PlanMaxAge = 24 * time.Hour

// PlanSubject is the subject of the address's plans.
func (a Address) PlanSubject() string { return a.subject(PlanPrefix) }

// PlanType is the CloudEvent type of a plan. Its data is a Plan.
const PlanType = typePrefix + "plan"

// Plan is what the applier would do with one reply of a dry-run
// controller (spec.dryRun), which it plans with its own code and publishes
// instead of writing anything: not a child, not the parent's status or
// finalizer, not an Event; or with a reply of a sync hook's shadow, which
// is never applied. It travels as a CloudEvent of type PlanType on the
// parent's PlanSubject, with the reply's extension attributes (Meta).
type Plan struct {
	// Hook is the hook whose reply was planned: sync or finalize, or
	// sync-shadow for a sync hook's shadow's (with ShadowDiff).
	Hook string `json:"hook"`
	// RequestID is the id of the request the reply answered.
	RequestID string `json:"requestID,omitempty"`
	// Generation and ResourceVersion are the parent's, as the request
	// observed it.
	Generation      int64  `json:"generation"`
	ResourceVersion string `json:"resourceVersion"`
	// Rejected, when set, is why the reply would be rejected whole (or the
	// hook failed): the parent would get Synced=False and a Warning Event
	// with its reason and message, and nothing else would be written.
	Rejected *Rejected `json:"rejected,omitempty"`
	// Children is what would be done to each child: the desired ones in the
	// reply's order, then those deleted or released.
	Children []Step `json:"children"`
	// Status is the parent's status as it would be written, with uc's
	// observedGeneration and conditions; nil when it would not be written
	// (it is unchanged, or left to the sync that follows a change to the
	// children).
	Status map[string]any `json:"status,omitempty"`
	// Finalizer is "add" or "remove" when uc's finalizer on the parent
	// would change.
	Finalizer string `json:"finalizer,omitempty"`
	// Events are the Events that would be recorded on the parent: uc's own
	// about the children, and the hook's.
	Events []PlanEvent `json:"events,omitempty"`
	// ResyncAfterSeconds is the reply's: the watcher syncs the parent again
	// then (the resync is asked for: it writes nothing).
	ResyncAfterSeconds float64 `json:"resyncAfterSeconds,omitempty"`
	// ShadowDiff, on the plan of a shadow's reply (hook sync-shadow), is
	// how it differs from the sync hook's reply to the same request, both
	// planned against the same observed state. A shadow's plan is never
	// applied, whether the controller runs dry or not.
	ShadowDiff *ShadowDiff `json:"shadowDiff,omitempty"`
}

// ShadowDiff is how a shadow's reply differs from the sync hook's reply to
// the same request: what the shadow would make of the parent that the
// sync hook does not. It is empty when they would make the same.
type ShadowDiff struct {
	// Request is the id of the sync request both replies answer.
	Request string `json:"request"`
	// SyncRejected and ShadowRejected say why the sync hook's, or the
	// shadow's, reply would be rejected, when only one would be, or both
	// for different reasons; the children and status are not compared
	// then.
	SyncRejected   *Rejected `json:"syncRejected,omitempty"`
	ShadowRejected *Rejected `json:"shadowRejected,omitempty"`
	// Added are the children the shadow wants and the sync hook does not,
	// Removed those the sync hook wants and the shadow does not (each
	// "<Kind>.<apiVersion> <namespace>/<name>"), and Changed those both
	// want, but not alike.
	Added   []string    `json:"added,omitempty"`
	Removed []string    `json:"removed,omitempty"`
	Changed []ChildDiff `json:"changed,omitempty"`
	// Status are the status fields the two replies set differently, as
	// paths (status.replicas, status.conditions[Ready]).
	Status []string `json:"status,omitempty"`
	// Hash identifies the difference: the same difference, for another
	// request, has the same hash.
	Hash string `json:"hash,omitempty"`
}

// Empty tells a shadow that would make of the parent what the sync hook
// makes.
func (d *ShadowDiff) Empty() bool {
	return d.SyncRejected == nil && d.ShadowRejected == nil && len(d.Added)+len(d.Removed)+len(d.Changed)+len(d.Status) == 0
}

// ChildDiff is a child that the sync hook and its shadow want differently.
type ChildDiff struct {
	// Child is "<Kind>.<apiVersion> <namespace>/<name>".
	Child string `json:"child"`
	// Diff is a unified diff (YAML) from the sync hook's desired child to
	// the shadow's, as uc would write each.
	Diff string `json:"diff"`
}

// Rejected is why a reply would not be applied.
type Rejected struct {
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// Step is what the applier does, or would do, to one child.
type Step struct {
	// Action is create, update, recreate (delete, then create), adopt,
	// delete, release (no longer the parent's), unchanged, or kept (it
	// differs, but its update method leaves it as it is).
	Action string `json:"action"`
	// Kind is the child's kind as a request groups it, e.g.
	// Deployment.apps/v1.
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	// Diff is a unified diff from the live child's fields that the desired
	// child sets to the desired child: an update's, a recreate's or a kept
	// child's.
	Diff string `json:"diff,omitempty"`
}

// PlanEvent is an Event that would be recorded on the parent.
type PlanEvent struct {
	Type    string `json:"type"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}
