package v1alpha1

import "universalcontroller.dev/uc/schemas/hooks"

// The names uc writes on the objects it manages: the conditions and their
// reasons on parents, the annotation and label on children, the field
// managers and finalizers. They are part of uc's API — users' tools,
// alerts and tests read them — so they are declared here, once, and the
// roles use them from here.

// The conditions uc sets on a parent. A hook's reply may not set them
// (schemas/hooks).
const (
	// ConditionSynced says whether the latest hook reply was applied.
	ConditionSynced = hooks.ConditionSynced
	// ConditionUpdated says how far a rolling update got.
	ConditionUpdated = hooks.ConditionUpdated
)

// The reasons of the Synced condition; the False ones are also the reasons
// of uc's Warning Events.
const (
	// ReasonApplied: the latest hook reply was applied (True).
	ReasonApplied = "Applied"
	// ReasonHookFailed: the hook failed or timed out; it is retried.
	ReasonHookFailed = "HookFailed"
	// ReasonInvalidHookReply: uc rejected the hook's reply whole.
	ReasonInvalidHookReply = "InvalidHookReply"
	// ReasonInvalidSelector: the parent's selector cannot be read.
	ReasonInvalidSelector = "InvalidSelector"
	// ReasonApplyFailed: the apiserver refused a write of the reply.
	ReasonApplyFailed = "ApplyFailed"
	// ReasonRecreateLoop: a child updated by Recreate was re-created for
	// the same desired state again and again, and still differs from it
	// (the apiserver sets a field back); uc leaves it as it is until the
	// desired state changes. The other children are applied.
	ReasonRecreateLoop = "RecreateLoop"
	// ReasonSyncError is the reason of the Warning Events of controllers
	// served from Metacontroller's objects, as Metacontroller's own; their
	// message starts with uc's reason.
	ReasonSyncError = "SyncError"
)

// The reasons of the Updated condition.
const (
	// ReasonOnLatestRevision: every child is on the latest revision.
	ReasonOnLatestRevision = "OnLatestRevision"
	// ReasonRolloutProgressing: children are moving to the latest revision.
	ReasonRolloutProgressing = "RolloutProgressing"
	// ReasonRolloutWaiting: the rollout waits for a child to be ready.
	ReasonRolloutWaiting = "RolloutWaiting"
)

// The source components of the Events uc records: its own, and those a
// hook's reply asks for, so that they are told from uc's own.
const (
	EventSource     = "universalcontroller"
	HookEventSource = "universalcontroller-hook"
)

// AnnotationAppliedHash on a child is the hash of the desired object last
// applied, so a field dropped from the desired object is noticed (and
// server-side apply removes it).
const AnnotationAppliedHash = "universalcontroller.dev/applied-hash"

// LabelControllerUID labels the children of a controller with
// generateSelector: true; their selector is controller-uid=<parent UID>.
const LabelControllerUID = "controller-uid"

// LabelPartition on a parent and on its children and revisions is the
// parent's partition (core.Controller.Partition: bus.Partition of its UID
// among the installation's partitions, unless a label of its own names
// another). uc stamps it when its watchers are sharded: a watcher shard
// lists and watches only the objects of the partitions it holds, the API
// server selecting them by this label.
const LabelPartition = "universalcontroller.dev/partition"

// FieldManager is the field manager of uc's writes for a controller (of its
// finalizers: FieldManager(controller) + "/finalizer").
func FieldManager(controller string) string { return "uc/" + controller }

// ControllerFinalizer is the finalizer uc holds on the parents of a
// UniversalController with a finalize hook.
func ControllerFinalizer(controller string) string { return "universalcontroller.dev/" + controller }

// DecoratorFinalizer is the finalizer uc holds on the objects of a
// UniversalDecorator with a finalize hook: a domain of its own, so that it
// never is a controller's.
func DecoratorFinalizer(decorator string) string {
	return "decorator.universalcontroller.dev/" + decorator
}
