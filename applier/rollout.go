package applier

import (
	"context"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"universalcontroller.dev/uc/core"
	"universalcontroller.dev/uc/internal/revision"
	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// rollout works out the next step of the parent's rollout from the replies
// of each of its revisions. Its errors are worth a retry: the replies were
// computed from another revision of the parent than the one this replica's
// cache holds (a newer reply or a fresher cache resolves it), or the
// apiserver failed.
func (rc *reconciler) rollout(ctx context.Context, ctl *core.Controller, parent *unstructured.Unstructured, m bus.Meta, replies map[string]*hooks.SyncResponse) (*core.Rollout, error) {
	paths := revision.FieldPaths(&ctl.Spec)
	patch := revision.Patch(parent, paths)
	hash, err := revision.Hash(patch)
	if err != nil {
		return nil, err
	}
	switch want := m.LatestRevision(); want {
	case "": // a reply from before the controller rolled its children out
		replies[hash] = replies[""]
	case hash:
	default:
		return nil, fmt.Errorf("the replies are for revision %s of the parent, this replica's cache has revision %s: waiting for the newer one", want, hash)
	}
	revs, err := rc.revisions(ctx, parent)
	if err != nil {
		return nil, err
	}
	var mc []*unstructured.Unstructured
	var imported []string
	if ctl.Metacontroller {
		if mc, err = rc.metacontrollerRevisions(ctx, ctl, parent); err != nil {
			return nil, err
		}
		if revs, imported, err = core.ImportRevisions(ctl, parent, revs, mc); err != nil {
			return nil, err
		}
	}
	ro, err := core.PlanRollout(ctl, parent, patch, hash, revs, replies, rc.reg)
	if err != nil {
		return nil, err
	}
	for _, name := range imported {
		ro.Changed[name] = true
	}
	ro.Metacontroller = mc
	return ro, nil
}

// revisions lists a parent's ControllerRevisions from the apiserver, not
// from a cache: the step must start from the progress last written.
func (rc *reconciler) revisions(ctx context.Context, parent *unstructured.Unstructured) ([]*revision.Revision, error) {
	list, err := rc.dyn.Resource(v1alpha1.RevisionResource).Namespace(parent.GetNamespace()).List(ctx, metav1.ListOptions{
		LabelSelector: labels.Set{v1alpha1.LabelRevisionParentUID: string(parent.GetUID())}.String(),
	})
	if err != nil {
		return nil, fmt.Errorf("list the revisions of %s: %w", core.ObjectKey(parent), err)
	}
	revs := make([]*revision.Revision, 0, len(list.Items))
	for i := range list.Items {
		rev, err := revision.Decode(&list.Items[i])
		if err != nil {
			return nil, err
		}
		revs = append(revs, rev)
	}
	return revs, nil
}

// saveRevisions writes a rollout step's progress, before any child is
// touched: the latest revision first, then the older ones, then it deletes
// the revisions no child is on any more, and last Metacontroller's that
// uc's now hold.
func (rc *reconciler) saveRevisions(ctx context.Context, ro *core.Rollout) error {
	res := rc.dyn.Resource(v1alpha1.RevisionResource).Namespace(ro.Latest.Namespace)
	order := append([]*revision.Revision{ro.Latest}, ro.Revisions...)
	unused := ro.Unused()
	done := map[string]bool{}
	for _, rev := range order {
		if !ro.Changed[rev.Name] || done[rev.Name] || slices.Contains(unused, rev) {
			continue
		}
		done[rev.Name] = true
		rev.Children = slices.DeleteFunc(rev.Children, func(c v1alpha1.RevisionChildren) bool { return len(c.Names) == 0 })
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(rev.ControllerRevision)
		if err != nil {
			return fmt.Errorf("encode revision %s: %w", rev.Name, err)
		}
		u := &unstructured.Unstructured{Object: obj}
		if err := mayWrite(ctx); err != nil {
			return err
		}
		if rev.UID == "" { // new: the latest, or one of Metacontroller's
			_, err = res.Create(ctx, u, metav1.CreateOptions{})
		} else {
			_, err = res.Update(ctx, u, metav1.UpdateOptions{})
		}
		if err != nil {
			return fmt.Errorf("save revision %s: %w", rev.Name, err)
		}
	}
	for _, rev := range unused {
		if rev.UID == "" {
			continue // one of Metacontroller's, never created as uc's
		}
		if err := deleteRevision(ctx, res, rev.Name, rev.UID, rev.ResourceVersion); err != nil {
			return fmt.Errorf("delete unused revision %s: %w", rev.Name, err)
		}
	}
	return rc.deleteMetacontrollerRevisions(ctx, ro.Metacontroller)
}

// deleteRevision deletes a ControllerRevision of that UID, if it is still
// there as it was read (its resourceVersion).
func deleteRevision(ctx context.Context, res dynamic.ResourceInterface, name string, uid types.UID, rv string) error {
	if err := mayWrite(ctx); err != nil {
		return err
	}
	err := res.Delete(ctx, name, metav1.DeleteOptions{Preconditions: preconditions(uid, rv)})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}
