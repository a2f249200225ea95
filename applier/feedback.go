package applier

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/record"

	"universalcontroller.dev/uc/schemas/hooks"
)

// A reply's conditions join uc's own in the parent's status (see
// writeStatus); its events are recorded here, once the reply is applied.

// HookEventCorrelation is how the Events of hooks are correlated, with
// client-go's EventCorrelator: as uc's own — identical Events counted on
// one Event object, ten similar ones (same reason, another message) within
// ten minutes combined into one — but rate-limited per parent and reason
// (a burst of 25, then one every 5 minutes), not per parent alone, so that
// a hook repeating one reason neither silences its other reasons nor uc's
// Events, which have a broadcaster of their own.
var HookEventCorrelation = record.CorrelatorOptions{
	SpamKeyFunc: func(e *corev1.Event) string {
		key, _ := record.EventAggregatorByReasonFunc(e) // the parent, the type and the reason
		return key
	},
}

// recordHookEvents records the events of an applied reply on the parent.
func (rc *reconciler) recordHookEvents(parent *unstructured.Unstructured, events []hooks.Event) {
	for _, e := range events {
		rc.hookEvents.Event(parent, e.Type, e.Reason, e.Message)
	}
}
