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
// +kubebuilder:resource:scope=Cluster,shortName=uc;uctl,categories=uc-all
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
	ParentResource ParentResource `json:"parentResource"`
	// ChildResources are the resources the controller may create for a
	// parent, each with how its objects are updated. The hooks' replies
	// may hold children of these resources only.
	// +optional
	ChildResources []ChildResource `json:"childResources,omitempty"`
	// ResyncPeriodSeconds re-syncs every parent periodically.
	// +optional
	ResyncPeriodSeconds *int32 `json:"resyncPeriodSeconds,omitempty"`
	// GenerateSelector labels children with the parent's UID and selects on it
	// instead of on the parent's spec.selector.
	// +optional
	GenerateSelector *bool           `json:"generateSelector,omitempty"`
	Hooks            ControllerHooks `json:"hooks"`
	// EndpointConfigs hold the TLS and credentials of webhooks by host: a
	// webhook whose URL's host (or host:port) matches an entry's host is
	// called with the first such entry's settings, unless the webhook sets
	// any caBundle, clientTLS, authorization or basicAuth of its own: then
	// only its own are used.
	// +optional
	EndpointConfigs []EndpointConfig `json:"endpointConfigs,omitempty"`
	// DryRun runs the whole pipeline — the watcher, the hooks, the
	// applier's planning — and writes nothing to the cluster: not a child,
	// not a parent's status or finalizer, not an Event. The applier
	// publishes each plan instead, a CloudEvent of type
	// dev.universalcontroller.plan on uc.plan.<controller>.…, kept in the
	// stream UC_PLANS (the last one per parent, for a day); uc trace shows
	// a parent's.
	// +optional
	DryRun *bool `json:"dryRun,omitempty"`
}

// EndpointConfig is how uc connects to the webhooks of one host.
type EndpointConfig struct {
	// Host is the host, or host:port, of the webhook URLs it applies to,
	// e.g. my-hook.hooks or my-hook.hooks:8443. It matches without regard
	// to case, and with or without the scheme's default port.
	// +kubebuilder:validation:MinLength=1
	Host       string `json:"host"`
	Connection `json:",inline"`
}

// ResourceRule names a resource by apiVersion and plural resource name.
type ResourceRule struct {
	// APIVersion is the resource's group/version, e.g. apps/v1, or v1 for
	// the core group.
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
	// Conditions a child must all have to pass.
	// +optional
	Conditions []StatusConditionCheck `json:"conditions,omitempty"`
}

// StatusConditionCheck passes when the child has a condition of Type with the
// given Status and Reason (each optional).
type StatusConditionCheck struct {
	// Type is the condition's type, e.g. Ready.
	Type string `json:"type"`
	// Status the condition must have, e.g. "True" (any when unset).
	// +optional
	Status *string `json:"status,omitempty"`
	// Reason the condition must have (any when unset).
	// +optional
	Reason *string `json:"reason,omitempty"`
}

// ControllerHooks are a UniversalController's hooks: Metacontroller's
// CompositeController hooks.
type ControllerHooks struct {
	Hooks `json:",inline"`
	// PreUpdateChild is accepted and ignored, as Metacontroller (v4.17)
	// declares it and never calls it.
	// +optional
	PreUpdateChild *Hook `json:"preUpdateChild,omitempty"`
	// PostUpdateChild is accepted and ignored, as Metacontroller (v4.17)
	// declares it and never calls it.
	// +optional
	PostUpdateChild *Hook `json:"postUpdateChild,omitempty"`
}

// Hooks are the hooks uc calls. Sync is required.
type Hooks struct {
	// Sync computes the status and desired children of a parent (of a
	// decorated object: its attachments) from its observed state. It is
	// served by its webhook, its destination, or — with neither — any
	// bus-native worker consuming its subject.
	Sync SyncHook `json:"sync"`
	// Finalize is called instead of sync while a parent (a decorated
	// object) is being deleted, until it replies finalized: true; uc holds
	// a finalizer on it meanwhile. It is served by its webhook, its
	// destination, or — with neither — any bus-native worker consuming its
	// subject.
	// +optional
	Finalize *Hook `json:"finalize,omitempty"`
	// Customize names, per parent (decorated object), the related objects
	// its sync requests carry. It is served by its webhook, its
	// destination, or — with neither — any bus-native worker consuming its
	// subject.
	// +optional
	Customize *Hook `json:"customize,omitempty"`
}

// Named is the hook of that name (sync, finalize, customize, or
// sync-shadow, the sync hook's shadow), or nil when it is not declared.
func (h *Hooks) Named(name string) *Hook {
	switch name {
	case "sync":
		return &h.Sync.Hook
	case "sync-shadow":
		return h.Sync.Shadow
	case "finalize":
		return h.Finalize
	case "customize":
		return h.Customize
	}
	return nil
}

// SyncHook is the sync hook, and the shadow that is called beside it.
type SyncHook struct {
	Hook `json:",inline"`
	// Shadow is a second sync hook — a new version of the hook, say —
	// called with the same requests as the sync hook, whose replies are
	// never applied: uc plans each of its replies beside the sync hook's,
	// against the same observed state, and records how they differ (a
	// metric, the parent's last difference on uc trace, and a Normal Event
	// ShadowDiffers once per distinct difference). It is served by its
	// webhook, its destination, or — with neither — any bus-native worker
	// of the hook sync-shadow. Its failures never touch the parent. A
	// UniversalController's only: a UniversalDecorator's sync hook has no
	// shadow.
	// +optional
	Shadow *Hook `json:"shadow,omitempty"`
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
	// URL of the webhook, e.g. http://my-hook.hooks/sync. Set it, or
	// service (with path).
	// +optional
	URL *string `json:"url,omitempty"`
	// +optional
	Service *ServiceReference `json:"service,omitempty"`
	// Path of the webhook on service, e.g. /sync.
	// +optional
	Path *string `json:"path,omitempty"`
	// Timeout of one call, e.g. "10s".
	// +optional
	Timeout *metav1.Duration `json:"timeout,omitempty"`
	// Etag caches the webhook's replies by ETag.
	// +optional
	Etag *WebhookEtag `json:"etag,omitempty"`
	// ResponseUnmarshallMode says whether a reply with unknown or
	// duplicated fields is invalid (strict) or read without them (loose).
	// It defaults to strict for hook version v2, loose for v1.
	// +optional
	ResponseUnmarshallMode *ResponseUnmarshallMode `json:"responseUnMarshallMode,omitempty"`
	// Connection is the webhook's own TLS and credentials. Setting any of
	// them sets them all: a matching spec.endpointConfigs entry is not
	// used then.
	Connection `json:",inline"`
}

// Connection is how uc connects to a webhook: which CAs it trusts, and the
// credentials it presents.
type Connection struct {
	// CABundle verifies the webhook's server certificate. Without it, the
	// system's roots do.
	// +optional
	CABundle *CABundle `json:"caBundle,omitempty"`
	// ClientTLS presents a client certificate (mutual TLS).
	// +optional
	ClientTLS *ClientTLS `json:"clientTLS,omitempty"`
	// Authorization sends an Authorization header with a credential from a
	// Secret, e.g. a bearer token. Set at most one of authorization and
	// basicAuth.
	// +optional
	Authorization *Authorization `json:"authorization,omitempty"`
	// BasicAuth sends HTTP basic authentication from a Secret.
	// +optional
	BasicAuth *BasicAuth `json:"basicAuth,omitempty"`
}

// IsZero tells a Connection that sets nothing.
func (c Connection) IsZero() bool { return c == Connection{} }

// WebhookEtag configures ETag caching of a webhook's replies: uc keeps the
// last reply that came with an ETag header for each parent, sends its ETag
// in If-None-Match, and takes a 304 Not Modified or 412 Precondition Failed
// answer to mean that reply again.
type WebhookEtag struct {
	// Enabled turns the cache on (default false).
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
	// CacheTimeoutSeconds is how long a reply is kept (default, or 0:
	// until the hook's spec changes).
	// +optional
	CacheTimeoutSeconds *int32 `json:"cacheTimeoutSeconds,omitempty"`
	// CacheCleanupSeconds is how often replies past their timeout are
	// dropped from memory (default, or 0: never; an expired reply is never
	// used either way).
	// +optional
	CacheCleanupSeconds *int32 `json:"cacheCleanupSeconds,omitempty"`
}

// ResponseUnmarshallMode is how strictly a hook's reply is read.
// +kubebuilder:validation:Enum=loose;strict
type ResponseUnmarshallMode string

// The unmarshall modes.
const (
	ResponseUnmarshallLoose  ResponseUnmarshallMode = "loose"
	ResponseUnmarshallStrict ResponseUnmarshallMode = "strict"
)

// StrictReplies tells whether a reply of the hook with unknown or
// duplicated fields is invalid: its webhook's responseUnMarshallMode when
// set, else true for hook version v2 and false for v1, as in Metacontroller.
func (h *Hook) StrictReplies() bool {
	if h == nil {
		return false
	}
	if h.Webhook != nil && h.Webhook.ResponseUnmarshallMode != nil {
		return *h.Webhook.ResponseUnmarshallMode == ResponseUnmarshallStrict
	}
	return h.Version == HookV2
}

// CABundle holds PEM-encoded CA certificates, inline or in a key of a Secret
// or a ConfigMap. Set exactly one.
type CABundle struct {
	// Inline is the PEM-encoded certificates themselves.
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
	// Name of the Secret or ConfigMap.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// Namespace of the Secret or ConfigMap.
	// +kubebuilder:validation:MinLength=1
	Namespace string `json:"namespace"`
	// Key in its data; the field holding the reference says its default.
	// +optional
	Key string `json:"key,omitempty"`
}

// SecretReference names a Secret.
type SecretReference struct {
	// Name of the Secret.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// Namespace of the Secret.
	// +kubebuilder:validation:MinLength=1
	Namespace string `json:"namespace"`
}

// Authorization is an Authorization header: "<type> <credentials>".
type Authorization struct {
	// Type is the scheme (default Bearer). Basic is refused: use
	// basicAuth.
	// +optional
	Type string `json:"type,omitempty"`
	// SecretRef is the Secret key holding the credentials; the key
	// defaults to token.
	SecretRef KeyReference `json:"secretRef"`
}

// BasicAuth takes the username and password from a Secret, by default from
// the keys of a Secret of type kubernetes.io/basic-auth.
type BasicAuth struct {
	SecretRef SecretReference `json:"secretRef"`
	// UsernameKey is the Secret's key holding the username (default
	// username).
	// +optional
	UsernameKey string `json:"usernameKey,omitempty"`
	// PasswordKey is the Secret's key holding the password (default
	// password).
	// +optional
	PasswordKey string `json:"passwordKey,omitempty"`
}

// ClientTLS takes the client certificate and key from a Secret, by default
// from the keys of a Secret of type kubernetes.io/tls.
type ClientTLS struct {
	SecretRef SecretReference `json:"secretRef"`
	// CertKey is the Secret's key holding the PEM certificate (default
	// tls.crt).
	// +optional
	CertKey string `json:"certKey,omitempty"`
	// PrivateKeyKey is the Secret's key holding the PEM private key
	// (default tls.key).
	// +optional
	PrivateKeyKey string `json:"privateKeyKey,omitempty"`
}

// ServiceReference names a Service serving a webhook.
type ServiceReference struct {
	// Name of the Service.
	Name string `json:"name"`
	// Namespace of the Service.
	Namespace string `json:"namespace"`
	// Port of the Service (default 80).
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
	// ObservedGeneration is the generation of the spec the conditions are
	// about.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Ready is True while uc runs the controller, False with
	// the reason it cannot (e.g. an invalid spec).
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
	// Message is the Event's message: what failed.
	// +optional
	Message string `json:"message,omitempty"`
	// Time of the failure.
	Time metav1.Time `json:"time"`
}

// UniversalControllerList is a list of UniversalController objects.
//
// +kubebuilder:object:root=true
type UniversalControllerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []UniversalController `json:"items"`
}
