package core

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"universalcontroller.dev/uc/schemas/hooks"
)

// PlanDecoration decodes the data of a decorator's reply, which may have at
// most maxChildren attachments, and plans its attachments' writes.
func PlanDecoration(ctl *Controller, obj *unstructured.Unstructured, hook string, data []byte, maxChildren int, cache Cache) (*hooks.DecoratorResponse, []Write, error) {
	live := cacheLookup{cache}
	resp, err := DecodeData[hooks.DecoratorResponse](hook, data, ctl.Spec.Hooks.Named(hook).StrictReplies())
	if err == nil {
		err = CheckCount(len(resp.Attachments), maxChildren)
	}
	var actions []Write
	if err == nil {
		actions, err = planAttachments(ctl, obj, resp, live)
	}
	return resp, actions, err
}

// planAttachments turns a decorator's reply into the writes that make the
// object's attachments match it. It writes nothing, and it rejects the
// whole reply when any attachment is not one the decorator may manage: a
// kind it does not declare, or an existing object that is not already its
// attachment of this object.
func planAttachments(ctl *Controller, parent *unstructured.Unstructured, resp *hooks.DecoratorResponse, live liveObjects) ([]Write, error) {
	if err := resp.Validate(); err != nil {
		return nil, err
	}
	return planWrites(ctl, parent, resp.Attachments, attachments(ctl, parent.GetUID()), live)
}

// attachments is a UniversalDecorator's claim on a decorated object's
// attachments: it adopts nothing, and an object in the way is refused
// unless it is already the object's attachment of this decorator.
func attachments(ctl *Controller, parent types.UID) claim {
	return claim{
		list: "attachments", declaredIn: "attachments",
		mark:    func(o *unstructured.Unstructured) *unstructured.Unstructured { return attachment(ctl, o) },
		refuse:  func(*unstructured.Unstructured) error { return nil },
		sel:     labels.Nothing(),
		mayTake: func(cur *unstructured.Unstructured) error { return mayAttach(ctl, cur, parent) },
		letGo: func(o *unstructured.Unstructured) (Verb, string, bool) {
			return VerbDelete, "Deleted", ctl.IsAttachment(o)
		},
	}
}

// attachment marks a desired attachment, obj, as the decorator's, in place
// (see desiredObject), and returns it.
func attachment(ctl *Controller, obj *unstructured.Unstructured) *unstructured.Unstructured {
	annotations := obj.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[ctl.Decorator.Annotation] = ctl.Decorator.Name
	obj.SetAnnotations(annotations)
	return obj
}

// mayAttach tells why a decorator may not manage an existing object named
// as one of its attachments: it is not controlled by the decorated object,
// or it is but it is not the decorator's (the object's own controller made
// it, or another decorator did). It judges the live object.
func mayAttach(ctl *Controller, cur *unstructured.Unstructured, parent types.UID) error {
	ref := metav1.GetControllerOfNoCopy(cur)
	switch {
	case ref == nil:
		return fmt.Errorf("an object of that name exists and is controlled by no one: a decorator adopts nothing")
	case ref.UID != parent:
		return fmt.Errorf("an object of that name exists and is already controlled by %s %s: uc does not take it over", ref.Kind, ref.Name)
	case !ctl.IsAttachment(cur):
		return fmt.Errorf("an object of that name exists, controlled by the decorated object but not by this decorator (it lacks the annotation %s=%s): uc does not take it over",
			ctl.Decorator.Annotation, ctl.Decorator.Name)
	}
	return nil
}

// Present is a reply's labels or annotations without the null ones.
func Present(m map[string]*string) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		if v != nil {
			out[k] = *v
		}
	}
	return out
}

func Fingerprint(parts ...any) (string, error) {
	b, err := json.Marshal(parts) // maps marshal with sorted keys
	if err != nil {
		return "", fmt.Errorf("hash the decoration: %w", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:12]), nil
}
