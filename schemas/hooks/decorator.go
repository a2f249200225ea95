package hooks

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
)

// DecoratorRequest is the request of a decorator's sync and finalize hooks
// (Metacontroller's DecoratorController hook request).
type DecoratorRequest struct {
	// Controller is the UniversalDecorator object.
	Controller *unstructured.Unstructured `json:"controller"`
	// Object is the decorated object.
	Object *unstructured.Unstructured `json:"object"`
	// Attachments has an entry for every declared attachment kind, even
	// when empty, keyed as the hook version asks (see ObjectKey).
	Attachments GroupedObjects `json:"attachments"`
	Related     GroupedObjects `json:"related"`
	// Finalizing is true when the finalize hook is called.
	Finalizing bool `json:"finalizing"`
}

// DecoratorResponse is the reply of a decorator's sync and finalize hooks.
type DecoratorResponse struct {
	// Labels and Annotations are set on the decorated object; a null value
	// leaves the key out. uc writes them with server-side apply under the
	// decorator's own field manager, so a key the decorator set before and
	// no longer sets is removed.
	Labels      map[string]*string `json:"labels,omitempty"`
	Annotations map[string]*string `json:"annotations,omitempty"`
	// Status, when not null, is applied to the decorated object's status,
	// under the same field manager; {} drops every status field the
	// decorator set (so it must not be omitted when empty).
	Status map[string]any `json:"status"`
	// Attachments is the desired state of every attachment. An observed
	// attachment that is not listed is deleted.
	Attachments []*unstructured.Unstructured `json:"attachments"`
	// ResyncAfterSeconds asks for one more sync of this object after a
	// delay.
	ResyncAfterSeconds float64 `json:"resyncAfterSeconds,omitempty"`
	// Finalized, in a finalize reply, lets the object go.
	Finalized bool `json:"finalized,omitempty"`
}

// Validate checks what can be checked of a decorator's reply without the
// cluster: resyncAfterSeconds is not negative, every label and annotation
// is one Kubernetes accepts, and every attachment has an apiVersion, a kind
// and a name.
func (r *DecoratorResponse) Validate() error {
	if r.ResyncAfterSeconds < 0 {
		return fmt.Errorf("resyncAfterSeconds is negative (%g)", r.ResyncAfterSeconds)
	}
	for key, v := range r.Labels {
		errs := validation.IsQualifiedName(key)
		if v != nil {
			errs = append(errs, validation.IsValidLabelValue(*v)...)
		}
		if len(errs) > 0 {
			return fmt.Errorf("labels[%q]: %s", key, strings.Join(errs, "; "))
		}
	}
	for key := range r.Annotations {
		if errs := validation.IsQualifiedName(strings.ToLower(key)); len(errs) > 0 {
			return fmt.Errorf("annotations[%q]: %s", key, strings.Join(errs, "; "))
		}
	}
	return validateObjects("attachments", r.Attachments)
}
