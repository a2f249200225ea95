package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// DecoratorResource is the GroupVersionResource of UniversalDecorator
// objects.
var DecoratorResource = schema.GroupVersionResource{Group: Group, Version: Version, Resource: "universaldecorators"}

// UniversalDecorator registers a decorator: a controller that attaches
// objects ("attachments") to existing objects it does not own — the objects
// of the resources it selects — and may set their labels, annotations and
// status. Its spec is Metacontroller's DecoratorController spec, field for
// field.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=ucd,categories=uc-all
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Resources",type=string,JSONPath=`.spec.resources[*].resource`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type UniversalDecorator struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   UniversalDecoratorSpec   `json:"spec"`
	Status UniversalDecoratorStatus `json:"status,omitempty"`
}

// UniversalDecoratorSpec is Metacontroller's DecoratorController spec.
type UniversalDecoratorSpec struct {
	// Resources select the objects to decorate.
	// +kubebuilder:validation:MinItems=1
	Resources []DecoratorResourceRule `json:"resources"`
	// Attachments are the kinds the decorator may attach to a decorated
	// object.
	// +optional
	Attachments []DecoratorAttachmentRule `json:"attachments,omitempty"`
	// ResyncPeriodSeconds re-syncs every decorated object periodically.
	// +optional
	ResyncPeriodSeconds *int32 `json:"resyncPeriodSeconds,omitempty"`
	Hooks               Hooks  `json:"hooks"`
	// EndpointConfigs hold the TLS and credentials of webhooks by host, as
	// UniversalControllerSpec.EndpointConfigs.
	// +optional
	EndpointConfigs []EndpointConfig `json:"endpointConfigs,omitempty"`
}

// DecoratorResourceRule selects the objects of one resource to decorate:
// those matching both selectors (each selects everything when unset).
type DecoratorResourceRule struct {
	ResourceRule `json:",inline"`
	// +optional
	LabelSelector *metav1.LabelSelector `json:"labelSelector,omitempty"`
	// +optional
	AnnotationSelector *AnnotationSelector `json:"annotationSelector,omitempty"`
	// IgnoreStatusChanges stops status-only updates of a decorated object
	// from triggering a sync.
	// +optional
	IgnoreStatusChanges *bool `json:"ignoreStatusChanges,omitempty"`
}

// AnnotationSelector is a label selector on annotations.
type AnnotationSelector struct {
	// MatchAnnotations are annotations an object must have, with these
	// values.
	// +optional
	MatchAnnotations map[string]string `json:"matchAnnotations,omitempty"`
	// MatchExpressions are requirements on an object's annotations, as a
	// label selector's on labels.
	// +optional
	MatchExpressions []metav1.LabelSelectorRequirement `json:"matchExpressions,omitempty"`
}

// DecoratorAttachmentRule is a resource the decorator may attach, with how
// its objects are updated.
type DecoratorAttachmentRule struct {
	ResourceRule `json:",inline"`
	// +optional
	UpdateStrategy *DecoratorAttachmentUpdateStrategy `json:"updateStrategy,omitempty"`
}

// DecoratorAttachmentUpdateStrategy is how attachments of one kind are
// updated. Attachments do not roll out: RollingRecreate acts as Recreate and
// RollingInPlace as InPlace, as in Metacontroller.
type DecoratorAttachmentUpdateStrategy struct {
	// Method defaults to OnDelete.
	// +optional
	Method ChildUpdateMethod `json:"method,omitempty"`
}

// UniversalDecoratorStatus reports whether the decorator is running.
type UniversalDecoratorStatus struct {
	// ObservedGeneration is the generation of the spec the conditions are
	// about.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Ready is True while uc runs the decorator, False with
	// the reason it cannot (e.g. an invalid spec).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// UniversalDecoratorList is a list of UniversalDecorator objects.
//
// +kubebuilder:object:root=true
type UniversalDecoratorList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []UniversalDecorator `json:"items"`
}
