// Package hooks holds the Go types of the hook messages: the requests uc sends
// to a controller's sync, finalize and customize hooks and the responses it
// expects back. The JSON is exactly Metacontroller's, for hook versions v1 and
// v2, so an existing Metacontroller hook works unchanged.
package hooks

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The hook names, as they appear in bus subjects and CloudEvent types.
const (
	Sync      = "sync"
	Finalize  = "finalize"
	Customize = "customize"
	// SyncShadow is the hook that serves a sync hook's shadow
	// (spec.hooks.sync.shadow): its requests are copies of the sync
	// hook's, and its replies are never applied.
	SyncShadow = "sync-shadow"
)

// All are the hooks a controller may declare.
var All = []string{Sync, Finalize, Customize, SyncShadow}

// ObjectMap holds the objects of one kind, keyed by name, or by
// "namespace/name" where the hook version asks for it (see ObjectKey).
type ObjectMap map[string]*unstructured.Unstructured

// GroupedObjects maps "<Kind>.<apiVersion>" (e.g. "Pod.v1",
// "Deployment.apps/v1") to the objects of that kind.
type GroupedObjects map[string]ObjectMap

// GroupKey is the key of a kind in GroupedObjects.
func GroupKey(kind, apiVersion string) string { return kind + "." + apiVersion }

// ObjectKey is the key of an object in an ObjectMap. Hook version v2 always
// uses "namespace/name" for namespaced objects; v1 does so only when the
// parent is cluster-scoped.
func ObjectKey(version string, parentNamespaced bool, obj *unstructured.Unstructured) string {
	ns := obj.GetNamespace()
	if ns == "" || (version != "v2" && parentNamespaced) {
		return obj.GetName()
	}
	return ns + "/" + obj.GetName()
}

// Insert adds obj under its kind and key.
func (g GroupedObjects) Insert(key string, obj *unstructured.Unstructured) {
	group := GroupKey(obj.GetKind(), obj.GetAPIVersion())
	if g[group] == nil {
		g[group] = ObjectMap{}
	}
	g[group][key] = obj
}

// SyncRequest is the request of the sync and finalize hooks.
type SyncRequest struct {
	// Controller is the UniversalController object.
	Controller *unstructured.Unstructured `json:"controller"`
	Parent     *unstructured.Unstructured `json:"parent"`
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
	// Children is the desired state of every child. An observed child that is
	// not listed is deleted.
	Children []*unstructured.Unstructured `json:"children"`
	// ResyncAfterSeconds asks for one more sync of this parent after a delay.
	ResyncAfterSeconds float64 `json:"resyncAfterSeconds,omitempty"`
	// Finalized, in a finalize reply, lets the parent go.
	Finalized bool `json:"finalized,omitempty"`
	// Events are recorded on the parent.
	Events []Event `json:"events,omitempty"`
	// Conditions are set in the parent's status.conditions, where its
	// status schema admits conditions. They are the hook's: a reply with a
	// status replaces the parent's status, and with it the conditions the
	// reply no longer sends; a reply without one sets its conditions in
	// the parent's status as it is, and leaves the others there.
	Conditions []Condition `json:"conditions,omitempty"`
}

// CustomizeRequest is the request of the customize hook.
type CustomizeRequest struct {
	Controller *unstructured.Unstructured `json:"controller"`
	Parent     *unstructured.Unstructured `json:"parent"`
}

// CustomizeResponse is the reply of the customize hook.
type CustomizeResponse struct {
	RelatedResources []RelatedResourceRule `json:"relatedResources"`
}

// RelatedResourceRule selects related objects by label selector, or by
// namespace and names; in hook version v2 also by namespace selector.
type RelatedResourceRule struct {
	APIVersion    string                `json:"apiVersion"`
	Resource      string                `json:"resource"`
	LabelSelector *metav1.LabelSelector `json:"labelSelector,omitempty"`
	// NamespaceSelector (v2) selects the namespaces to look in.
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
	Namespace         string                `json:"namespace,omitempty"`
	Names             []string              `json:"names,omitempty"`
}

// Validate checks a customize reply: a rule selects by names or by label
// selector, not both, and names a resource.
func (r *CustomizeResponse) Validate() error {
	for i, rule := range r.RelatedResources {
		switch {
		case rule.APIVersion == "" || rule.Resource == "":
			return fmt.Errorf("relatedResources[%d] has no apiVersion or resource", i)
		case len(rule.Names) > 0 && rule.LabelSelector != nil:
			return fmt.Errorf("relatedResources[%d] (%s) has both names and labelSelector", i, rule.Resource)
		}
	}
	return nil
}

// Validate checks what can be checked of a sync reply without the cluster:
// resyncAfterSeconds is not negative, every event and condition is one uc
// can record or set (see validateEvents and validateConditions), and every
// child has an apiVersion, a kind and a name.
func (r *SyncResponse) Validate() error {
	if r.ResyncAfterSeconds < 0 {
		return fmt.Errorf("resyncAfterSeconds is negative (%g)", r.ResyncAfterSeconds)
	}
	if err := append(validateEvents(r.Events), validateConditions(r.Conditions)...).ToAggregate(); err != nil {
		return err
	}
	return validateObjects("children", r.Children)
}

// validateObjects checks that every object of a reply's list (its field)
// has an apiVersion, a kind and a name.
func validateObjects(field string, objs []*unstructured.Unstructured) error {
	for i, c := range objs {
		switch {
		case c == nil:
			return fmt.Errorf("%s[%d] is null", field, i)
		case c.GetAPIVersion() == "" || c.GetKind() == "":
			return fmt.Errorf("%s[%d] (%q) has no apiVersion or kind", field, i, c.GetName())
		case c.GetName() == "":
			return fmt.Errorf("%s[%d] (%s) has no metadata.name", field, i, GroupKey(c.GetKind(), c.GetAPIVersion()))
		}
	}
	return nil
}
