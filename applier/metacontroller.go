package applier

// A rollout Metacontroller left half-way. Metacontroller v4.17 records the
// rolling updates of a CompositeController's parent in its own
// ControllerRevisions (metacontroller.k8s.io/v1alpha1): one per revision of
// the parent that children are on, in the parent's namespace, controlled by
// the parent, labelled with the parent resource's group and name, holding
// the parent's revisionHistory.fieldPaths (parentPatch) and the children on
// it by apiGroup, kind and name. The one whose parentPatch is the parent's
// now is the latest; the others have no order.
//
// A controller served from Metacontroller's API takes that record over at
// the parent's next rollout step: Metacontroller's revisions become uc's
// (the same parentPatch and children, in the order Metacontroller created
// them), the step goes on from there, and once uc's revisions are saved
// Metacontroller's are deleted, so the rollout has one record. While
// Metacontroller's revisions exist they are the newer record: uc's of the
// same parent give way to them.

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"universalcontroller.dev/uc/core"
)

// The labels Metacontroller puts on its ControllerRevisions so that those
// of parents of different resources never meet.
const (
	labelMetacontrollerAPIGroup = "metacontroller.k8s.io/apiGroup"
	labelMetacontrollerResource = "metacontroller.k8s.io/resource"
)

// metacontrollerRevisions lists the ControllerRevisions Metacontroller left
// for parent, from the apiserver: those it controls, of its resource.
func (rc *reconciler) metacontrollerRevisions(ctx context.Context, ctl *core.Controller, parent *unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	list, err := rc.dyn.Resource(core.MetacontrollerRevisionResource).Namespace(parent.GetNamespace()).List(ctx, metav1.ListOptions{
		LabelSelector: labels.Set{
			labelMetacontrollerAPIGroup: ctl.Parent.GVR.Group,
			labelMetacontrollerResource: ctl.Parent.GVR.Resource,
		}.String(),
	})
	if err != nil {
		return nil, fmt.Errorf("list Metacontroller's revisions of %s: %w", core.ObjectKey(parent), err)
	}
	var out []*unstructured.Unstructured
	for i := range list.Items {
		if ref := metav1.GetControllerOfNoCopy(&list.Items[i]); ref != nil && ref.UID == parent.GetUID() {
			out = append(out, &list.Items[i])
		}
	}
	return out, nil
}

// deleteMetacontrollerRevisions deletes Metacontroller's revisions once
// uc's hold what they said.
func (rc *reconciler) deleteMetacontrollerRevisions(ctx context.Context, mc []*unstructured.Unstructured) error {
	for _, u := range mc {
		res := rc.dyn.Resource(core.MetacontrollerRevisionResource).Namespace(u.GetNamespace())
		if err := deleteRevision(ctx, res, u.GetName(), u.GetUID(), u.GetResourceVersion()); err != nil {
			return fmt.Errorf("delete Metacontroller's revision %s: %w", core.ObjectKey(u), err)
		}
	}
	return nil
}
