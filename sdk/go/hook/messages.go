package hook

import (
	"encoding/json"
	"fmt"
)

// The messages of the hooks: what uc sends a controller's sync, finalize
// and customize hooks and what it expects back, and a decorator's. The JSON
// is exactly Metacontroller's, for hook versions v1 and v2 (docs/bus.md;
// uc's own processes read it with package schemas/hooks). Objects are plain
// JSON here (Object), so that a hook carries no Kubernetes library: Decode
// turns one into a Go type of one's choice, and a reply's objects are any
// value that encodes as one.

// The hook names, as bus subjects and CloudEvent types carry them.
const (
	syncHook       = "sync"
	finalizeHook   = "finalize"
	customizeHook  = "customize"
	syncShadowHook = "sync-shadow"
)

// Object is a Kubernetes object as encoding/json decodes it (its numbers
// are float64): a request's parent, child or related object. Decode reads
// it into a Go type.
type Object map[string]any

// GetName is the object's metadata.name.
func (o Object) GetName() string { return o.metadata("name") }

// GetNamespace is the object's metadata.namespace.
func (o Object) GetNamespace() string { return o.metadata("namespace") }

// GetKind is the object's kind.
func (o Object) GetKind() string {
	kind, _ := o["kind"].(string)
	return kind
}

// GetAnnotations is the object's metadata.annotations.
func (o Object) GetAnnotations() map[string]string {
	meta, _ := o["metadata"].(map[string]any)
	annotations, _ := meta["annotations"].(map[string]any)
	out := make(map[string]string, len(annotations))
	for k, v := range annotations {
		out[k], _ = v.(string)
	}
	return out
}

func (o Object) metadata(field string) string {
	meta, _ := o["metadata"].(map[string]any)
	s, _ := meta[field].(string)
	return s
}

// Decode turns obj into a T: a type of one's own for a custom resource
// (one with its spec's and status' fields), or one of k8s.io/api. A
// parent's spec, for instance:
//
//	type Foo struct {
//		Spec struct {
//			Replicas int `json:"replicas"`
//		} `json:"spec"`
//	}
//
//	foo, err := hook.Decode[Foo](req.Parent)
func Decode[T any](obj Object) (T, error) {
	var v T
	if err := convert(obj, &v); err != nil {
		return v, fmt.Errorf("decode %s %s: %w", obj.GetKind(), key(obj.GetNamespace(), obj.GetName()), err)
	}
	return v, nil
}

// ObjectOf turns v, a value that encodes as a Kubernetes object in JSON
// (such as a *corev1.Pod), into an Object: to build a request in a test,
// or to edit a typed object as plain JSON.
func ObjectOf(v any) (Object, error) {
	var obj Object
	if err := convert(v, &obj); err != nil {
		return nil, fmt.Errorf("encode %T as an object: %w", v, err)
	}
	return obj, nil
}

// convert sets *to from from, through JSON.
func convert(from, to any) error {
	data, err := json.Marshal(from)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, to)
}

func key(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// ObjectMap holds the objects of one kind, keyed by name, or by
// "namespace/name" where the hook version asks for it: always for
// namespaced objects in v2, and in v1 when the parent is cluster-scoped.
type ObjectMap map[string]Object

// GroupedObjects maps "<Kind>.<apiVersion>" (e.g. "Pod.v1",
// "Deployment.apps/v1"; see GroupKey) to the objects of that kind.
type GroupedObjects map[string]ObjectMap

// GroupKey is the key of a kind in GroupedObjects.
func GroupKey(kind, apiVersion string) string { return kind + "." + apiVersion }

// SyncRequest is the request of the sync and finalize hooks.
type SyncRequest struct {
	// Controller is the UniversalController object.
	Controller Object `json:"controller"`
	Parent     Object `json:"parent"`
	// Children has an entry for every declared child kind, even when empty.
	Children GroupedObjects `json:"children"`
	Related  GroupedObjects `json:"related"`
	// Finalizing is true when the finalize hook is called.
	Finalizing bool `json:"finalizing"`
}

// SyncResponse is the reply of the sync and finalize hooks.
type SyncResponse struct {
	// Status replaces the parent's status (uc adds observedGeneration and its
	// own conditions).
	Status map[string]any `json:"status,omitempty"`
	// Children is the desired state of every child: each a value that
	// encodes as a Kubernetes object in JSON, such as an Object or a
	// *appsv1.Deployment. An observed child that is not listed is deleted.
	Children []any `json:"children"`
	// ResyncAfterSeconds asks for one more sync of this parent after a delay.
	ResyncAfterSeconds float64 `json:"resyncAfterSeconds,omitempty"`
	// Finalized, in a finalize reply, lets the parent go.
	Finalized bool `json:"finalized,omitempty"`
	// Events are recorded on the parent (at most 16 a reply).
	Events []Event `json:"events,omitempty"`
	// Conditions are set in the parent's status.conditions, where its
	// status schema admits conditions (at most 16 a reply). They are the
	// hook's: a reply with a status replaces the parent's status, and with
	// it the conditions the reply no longer sends; a reply without one sets
	// its conditions in the parent's status as it is, and leaves the others
	// there.
	Conditions []Condition `json:"conditions,omitempty"`
}

// Event is an Event a reply asks uc to record on the parent, as a
// Kubernetes Event whose involved object is the parent.
type Event struct {
	// Type is Normal or Warning.
	Type string `json:"type"`
	// Reason is a short word, CamelCase by convention, that Events of the
	// same cause share: uc rate-limits a parent's Events per reason. At
	// most 128 bytes.
	Reason string `json:"reason"`
	// Message is for humans, at most 1024 bytes.
	Message string `json:"message,omitempty"`
}

// Condition is a condition a reply sets in the parent's status.conditions,
// with the meaning of Kubernetes' metav1.Condition: uc adds its
// observedGeneration (the generation the hook saw) and lastTransitionTime
// (when its status last changed).
type Condition struct {
	// Type names the condition, e.g. Ready or example.com/Degraded; it may
	// not be one of uc's own conditions, Synced and Updated.
	Type string `json:"type"`
	// Status is True, False or Unknown.
	Status string `json:"status"`
	// Reason is a CamelCase word saying why the condition has its status.
	Reason string `json:"reason"`
	// Message is for humans.
	Message string `json:"message,omitempty"`
}

// CustomizeRequest is the request of the customize hook.
type CustomizeRequest struct {
	Controller Object `json:"controller"`
	Parent     Object `json:"parent"`
}

// CustomizeResponse is the reply of the customize hook.
type CustomizeResponse struct {
	RelatedResources []RelatedResourceRule `json:"relatedResources"`
}

// RelatedResourceRule selects related objects by label selector, or by
// namespace and names; in hook version v2 also by namespace selector.
type RelatedResourceRule struct {
	APIVersion    string         `json:"apiVersion"`
	Resource      string         `json:"resource"`
	LabelSelector *LabelSelector `json:"labelSelector,omitempty"`
	// NamespaceSelector (v2) selects the namespaces to look in.
	NamespaceSelector *LabelSelector `json:"namespaceSelector,omitempty"`
	Namespace         string         `json:"namespace,omitempty"`
	Names             []string       `json:"names,omitempty"`
}

// LabelSelector is a Kubernetes label selector: every label of MatchLabels
// and every requirement of MatchExpressions must match.
type LabelSelector struct {
	MatchLabels      map[string]string          `json:"matchLabels,omitempty"`
	MatchExpressions []LabelSelectorRequirement `json:"matchExpressions,omitempty"`
}

// LabelSelectorRequirement is a requirement on one label: Operator is In,
// NotIn, Exists or DoesNotExist.
type LabelSelectorRequirement struct {
	Key      string   `json:"key"`
	Operator string   `json:"operator"`
	Values   []string `json:"values,omitempty"`
}

// DecoratorRequest is the request of a decorator's sync and finalize hooks
// (Metacontroller's DecoratorController hook request).
type DecoratorRequest struct {
	// Controller is the UniversalDecorator object.
	Controller Object `json:"controller"`
	// Object is the decorated object.
	Object Object `json:"object"`
	// Attachments has an entry for every declared attachment kind, even
	// when empty.
	Attachments GroupedObjects `json:"attachments"`
	Related     GroupedObjects `json:"related"`
	// Finalizing is true when the finalize hook is called.
	Finalizing bool `json:"finalizing"`
}

// DecoratorResponse is the reply of a decorator's sync and finalize hooks.
type DecoratorResponse struct {
	// Labels and Annotations are set on the decorated object; a null value
	// leaves the key out. A key the decorator set before and no longer sets
	// is removed.
	Labels      map[string]*string `json:"labels,omitempty"`
	Annotations map[string]*string `json:"annotations,omitempty"`
	// Status, when not null, is applied to the decorated object's status;
	// {} drops every status field the decorator set.
	Status map[string]any `json:"status"`
	// Attachments is the desired state of every attachment, each a value
	// that encodes as a Kubernetes object in JSON. An observed attachment
	// that is not listed is deleted.
	Attachments []any `json:"attachments"`
	// ResyncAfterSeconds asks for one more sync of this object after a
	// delay.
	ResyncAfterSeconds float64 `json:"resyncAfterSeconds,omitempty"`
	// Finalized, in a finalize reply, lets the object go.
	Finalized bool `json:"finalized,omitempty"`
}
