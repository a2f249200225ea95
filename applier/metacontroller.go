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
	"cmp"
	"context"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"universalcontroller.dev/uc/core"
	"universalcontroller.dev/uc/internal/revision"
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
		return nil, fmt.Errorf("list Metacontroller's revisions of %s: %w", objectKey(parent), err)
	}
	var out []*unstructured.Unstructured
	for i := range list.Items {
		if ref := metav1.GetControllerOfNoCopy(&list.Items[i]); ref != nil && ref.UID == parent.GetUID() {
			out = append(out, &list.Items[i])
		}
	}
	return out, nil
}

// importRevisions makes Metacontroller's revisions of a parent (mc) uc's:
// each with children becomes the uc revision of the same parentPatch,
// holding the same children (but those of kinds the controller does not
// roll out), numbered in the order Metacontroller created them. uc's
// revisions of the parent, revs, give way: one of the same parentPatch is
// reused with Metacontroller's children, the others lose their children
// (and so are deleted as unused, unless one is the latest). It returns the
// parent's revisions and the names of those to save.
func importRevisions(ctl *core.Controller, parent *unstructured.Unstructured, revs []*revision.Revision, mc []*unstructured.Unstructured) ([]*revision.Revision, []string, error) {
	if len(mc) == 0 {
		return revs, nil, nil
	}
	mc = slices.Clone(mc)
	slices.SortFunc(mc, func(x, y *unstructured.Unstructured) int {
		return cmp.Or(x.GetCreationTimestamp().Compare(y.GetCreationTimestamp().Time), cmp.Compare(x.GetName(), y.GetName()))
	})
	ours := map[string]*revision.Revision{}
	for _, rev := range revs {
		ours[rev.Name] = rev
	}
	var out []*revision.Revision
	made := map[string]*revision.Revision{}
	for _, u := range mc {
		theirs, err := revision.Decode(u)
		if err != nil {
			return nil, nil, err
		}
		if !theirs.HasChildren() {
			continue // Metacontroller's latest before any child moved to it
		}
		patch, err := theirs.PatchOf()
		if err != nil {
			return nil, nil, err
		}
		hash, err := revision.Hash(patch)
		if err != nil {
			return nil, nil, err
		}
		name := revision.Name(parent.GetName(), hash)
		rev := made[name]
		if rev == nil {
			if rev = ours[name]; rev != nil {
				rev.Children = nil // uc's: Metacontroller's children replace its own
				delete(ours, name)
			} else if rev, err = newRevision(ctl, parent, patch, hash); err != nil {
				return nil, nil, err
			}
			made[name] = rev
			out = append(out, rev)
		}
		for _, c := range theirs.Children {
			if !rolls(ctl, c.APIGroup, c.Kind) {
				continue // as Metacontroller forgets them: the kind no longer rolls
			}
			for _, child := range c.Names {
				rev.Add(c.APIGroup, c.Kind, child)
			}
		}
	}
	names := make([]string, 0, len(out)+len(ours))
	for i, rev := range out {
		rev.Revision = int64(i + 1)
		names = append(names, rev.Name)
	}
	for _, rev := range revs {
		if ours[rev.Name] == rev {
			rev.Children, rev.Revision = nil, 0
			out = append(out, rev)
			names = append(names, rev.Name)
		}
	}
	return out, names, nil
}

// rolls tells a child kind the controller rolls out.
func rolls(ctl *core.Controller, group, kind string) bool {
	return slices.ContainsFunc(ctl.Children, func(c core.Child) bool {
		return c.Rolling() && c.GVK.Group == group && c.GVK.Kind == kind
	})
}

// deleteMetacontrollerRevisions deletes Metacontroller's revisions once
// uc's hold what they said.
func (rc *reconciler) deleteMetacontrollerRevisions(ctx context.Context, mc []*unstructured.Unstructured) error {
	for _, u := range mc {
		res := rc.dyn.Resource(core.MetacontrollerRevisionResource).Namespace(u.GetNamespace())
		if err := deleteRevision(ctx, res, u.GetName(), u.GetUID(), u.GetResourceVersion()); err != nil {
			return fmt.Errorf("delete Metacontroller's revision %s: %w", objectKey(u), err)
		}
	}
	return nil
}
