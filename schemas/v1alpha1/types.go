// Package v1alpha1 holds the Go types of the universalcontroller.dev/v1alpha1
// API: the UniversalController object a user creates to register a controller.
// The CRD manifests in schemas/crds are generated from these types.
//
// +kubebuilder:object:generate=false
// +groupName=universalcontroller.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	duckv1 "knative.dev/pkg/apis/duck/v1"
)

// Group and Version of the API.
const (
	Group   = "universalcontroller.dev"
	Version = "v1alpha1"
)

// Resource is the GroupVersionResource of UniversalController objects.
var Resource = schema.GroupVersionResource{Group: Group, Version: Version, Resource: "universalcontrollers"}

// UniversalController registers one controller: the parent resource it
// manages, the child resources it may create, and where its hooks are.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=uc;uctl
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Parent",type=string,JSONPath=`.spec.parentResource.resource`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Failing",type=integer,JSONPath=`.status.parentsFailing`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type UniversalController struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   UniversalControllerSpec   `json:"spec"`
	Status UniversalControllerStatus `json:"status,omitempty"`
}

// UniversalControllerSpec is Metacontroller's CompositeController spec, field
// for field.
type UniversalControllerSpec struct {
	ParentResource ParentResource  `json:"parentResource"`
	ChildResources []ChildResource `json:"childResources,omitempty"`
	// ResyncPeriodSeconds re-syncs every parent periodically.
	// +optional
	ResyncPeriodSeconds *int32 `json:"resyncPeriodSeconds,omitempty"`
	// GenerateSelector labels children with the parent's UID and selects on it
	// instead of on the parent's spec.selector.
	// +optional
	GenerateSelector *bool `json:"generateSelector,omitempty"`
	Hooks            Hooks `json:"hooks"`
}

// ResourceRule names a resource by apiVersion and plural resource name.
type ResourceRule struct {
	// +kubebuilder:validation:MinLength=1
	APIVersion string `json:"apiVersion"`
	// Resource is the plural resource name, e.g. deployments.
	// +kubebuilder:validation:MinLength=1
	Resource string `json:"resource"`
}

// ParentResource is the resource a controller manages.
type ParentResource struct {
	ResourceRule `json:",inline"`
	// +optional
	RevisionHistory *RevisionHistory `json:"revisionHistory,omitempty"`
	// LabelSelector limits which parents this controller handles.
	// +optional
	LabelSelector *metav1.LabelSelector `json:"labelSelector,omitempty"`
	// IgnoreStatusChanges stops status-only updates of the parent from
	// triggering a sync.
	// +optional
	IgnoreStatusChanges *bool `json:"ignoreStatusChanges,omitempty"`
}

// RevisionHistory selects the parent fields that take part in a rollout.
type RevisionHistory struct {
	// FieldPaths defaults to ["spec"].
	// +optional
	FieldPaths []string `json:"fieldPaths,omitempty"`
}

// ChildResource is a resource the controller may create, with how it is updated.
type ChildResource struct {
	ResourceRule `json:",inline"`
	// +optional
	UpdateStrategy *ChildUpdateStrategy `json:"updateStrategy,omitempty"`
}

// ChildUpdateMethod says how a child that differs from its desired state is
// brought to it.
// +kubebuilder:validation:Enum=OnDelete;Recreate;InPlace;RollingRecreate;RollingInPlace
type ChildUpdateMethod string

// The update methods.
const (
	ChildUpdateOnDelete        ChildUpdateMethod = "OnDelete"
	ChildUpdateRecreate        ChildUpdateMethod = "Recreate"
	ChildUpdateInPlace         ChildUpdateMethod = "InPlace"
	ChildUpdateRollingRecreate ChildUpdateMethod = "RollingRecreate"
	ChildUpdateRollingInPlace  ChildUpdateMethod = "RollingInPlace"
)

// ChildUpdateStrategy is how children of one kind are updated.
type ChildUpdateStrategy struct {
	// Method defaults to OnDelete.
	// +optional
	Method ChildUpdateMethod `json:"method,omitempty"`
	// +optional
	StatusChecks *ChildStatusChecks `json:"statusChecks,omitempty"`
}

// ChildStatusChecks gate a rolling update on the children's conditions.
type ChildStatusChecks struct {
	// +optional
	Conditions []StatusConditionCheck `json:"conditions,omitempty"`
}

// StatusConditionCheck passes when the child has a condition of Type with the
// given Status and Reason (each optional).
type StatusConditionCheck struct {
	Type string `json:"type"`
	// +optional
	Status *string `json:"status,omitempty"`
	// +optional
	Reason *string `json:"reason,omitempty"`
}

// Hooks are the controller's hooks. Sync is required.
type Hooks struct {
	Sync Hook `json:"sync"`
	// +optional
	Finalize *Hook `json:"finalize,omitempty"`
	// +optional
	Customize *Hook `json:"customize,omitempty"`
}

// HookVersion selects the hook request format.
// +kubebuilder:validation:Enum=v1;v2
type HookVersion string

// The hook versions.
const (
	HookV1 HookVersion = "v1"
	HookV2 HookVersion = "v2"
)

// Hook says where a hook is served: an HTTP webhook, a Knative Addressable,
// or — with neither — any bus-native worker consuming the hook's subject.
type Hook struct {
	// Version defaults to v1.
	// +optional
	Version HookVersion `json:"version,omitempty"`
	// +optional
	Webhook *Webhook `json:"webhook,omitempty"`
	// +optional
	Destination *duckv1.Destination `json:"destination,omitempty"`
	// Delivery says how hard uc tries to deliver the hook's requests. The
	// dispatcher applies it to webhooks and destinations; the Go SDK reads
	// it from each request's controller and applies it to bus-native hooks.
	// +optional
	Delivery *Delivery `json:"delivery,omitempty"`
}

// Delivery bounds one call of a hook and says how a failed request is
// retried: after a growing, jittered delay, until it reached MaxDeliveries;
// then it goes to the dead-letter stream and the parent is told why.
type Delivery struct {
	// Timeout of one call (default 10s). For a webhook, webhook.timeout
	// wins when set.
	// +optional
	Timeout *metav1.Duration `json:"timeout,omitempty"`
	// MaxDeliveries is how many times a request is tried (default 10).
	// +kubebuilder:validation:Minimum=1
	// +optional
	MaxDeliveries *int32 `json:"maxDeliveries,omitempty"`
	// BackoffDelay is the delay before the first retry (default 1s). It
	// doubles with every retry, up to MaxBackoffDelay, and is cut by a
	// random part of up to its half (jitter). A 429 response's Retry-After
	// replaces it.
	// +optional
	BackoffDelay *metav1.Duration `json:"backoffDelay,omitempty"`
	// MaxBackoffDelay caps the delay between two deliveries (default 1m).
	// +optional
	MaxBackoffDelay *metav1.Duration `json:"maxBackoffDelay,omitempty"`
	// Concurrency is how many requests of this hook the dispatcher serves
	// at once (default 16), for a webhook or a destination. A bus-native
	// worker sets its own.
	// +kubebuilder:validation:Minimum=1
	// +optional
	Concurrency *int32 `json:"concurrency,omitempty"`
}

// Webhook is a Metacontroller-compatible HTTP hook.
type Webhook struct {
	// +optional
	URL *string `json:"url,omitempty"`
	// +optional
	Service *ServiceReference `json:"service,omitempty"`
	// +optional
	Path *string `json:"path,omitempty"`
	// Timeout of one call, e.g. "10s".
	// +optional
	Timeout *metav1.Duration `json:"timeout,omitempty"`
	// CABundle verifies the webhook's server certificate. Without it, the
	// system's roots do.
	// +optional
	CABundle *CABundle `json:"caBundle,omitempty"`
	// Authorization sends an Authorization header with a credential from a
	// Secret, e.g. a bearer token.
	// +optional
	Authorization *Authorization `json:"authorization,omitempty"`
	// BasicAuth sends HTTP basic authentication from a Secret.
	// +optional
	BasicAuth *BasicAuth `json:"basicAuth,omitempty"`
	// ClientTLS presents a client certificate (mutual TLS).
	// +optional
	ClientTLS *ClientTLS `json:"clientTLS,omitempty"`
}

// CABundle holds PEM-encoded CA certificates, inline or in a key of a Secret
// or a ConfigMap. Set exactly one.
type CABundle struct {
	// +optional
	Inline *string `json:"inline,omitempty"`
	// SecretRef's key defaults to ca.crt.
	// +optional
	SecretRef *KeyReference `json:"secretRef,omitempty"`
	// ConfigMapRef's key defaults to ca.crt.
	// +optional
	ConfigMapRef *KeyReference `json:"configMapRef,omitempty"`
}

// KeyReference names one key of a Secret or ConfigMap.
type KeyReference struct {
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// +kubebuilder:validation:MinLength=1
	Namespace string `json:"namespace"`
	// +optional
	Key string `json:"key,omitempty"`
}

// SecretReference names a Secret.
type SecretReference struct {
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// +kubebuilder:validation:MinLength=1
	Namespace string `json:"namespace"`
}

// Authorization is an Authorization header: "<type> <credentials>".
type Authorization struct {
	// Type is the scheme (default Bearer).
	// +optional
	Type string `json:"type,omitempty"`
	// Credentials is the Secret key holding them; the key defaults to token.
	Credentials KeyReference `json:"credentials"`
}

// BasicAuth takes the username and password from a Secret of type
// kubernetes.io/basic-auth (keys username and password).
type BasicAuth struct {
	SecretRef SecretReference `json:"secretRef"`
}

// ClientTLS takes the client certificate and key from a Secret of type
// kubernetes.io/tls (keys tls.crt and tls.key).
type ClientTLS struct {
	SecretRef SecretReference `json:"secretRef"`
}

// ServiceReference names a Service serving a webhook.
type ServiceReference struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	// +optional
	Port *int32 `json:"port,omitempty"`
	// Protocol is http (default) or https.
	// +optional
	Protocol *string `json:"protocol,omitempty"`
}

// UniversalControllerStatus reports whether the controller is running, and
// how many of its parents uc fails to sync: where a parent's status schema
// has no room for uc's Synced condition, this is where a failure shows
// besides the parent's Events.
type UniversalControllerStatus struct {
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// ParentsFailing counts the parents whose latest hook reply could not
	// be applied, or whose status the apiserver refused.
	// +optional
	ParentsFailing int32 `json:"parentsFailing,omitempty"`
	// LastFailure is the latest of those failures, kept after the parent
	// recovers.
	// +optional
	LastFailure *ParentFailure `json:"lastFailure,omitempty"`
}

// ParentFailure is why uc failed to sync one parent.
type ParentFailure struct {
	// Parent is the parent's namespace/name (its name when cluster-scoped).
	Parent string `json:"parent"`
	// Reason is the reason of the Warning Event recorded on the parent,
	// e.g. InvalidHookReply, HookFailed, ApplyFailed, StatusWriteFailed.
	Reason string `json:"reason"`
	// +optional
	Message string      `json:"message,omitempty"`
	Time    metav1.Time `json:"time"`
}

// UniversalControllerList is a list of UniversalController objects.
//
// +kubebuilder:object:root=true
type UniversalControllerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []UniversalController `json:"items"`
}
