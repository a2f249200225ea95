package applier

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/dynamic"

	"universalcontroller.dev/uc/core"
	"universalcontroller.dev/uc/internal/revision"
	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// rollout is one step of a parent's rolling update: which revision each
// child is on, the one child that moves to the latest revision in this step
// (if the children already there pass their status checks), and the desired
// children, each as its own revision's reply wants it.
type rollout struct {
	revs    []*revision.Revision // oldest first; latest is among them
	latest  *revision.Revision
	changed map[string]bool // names of revisions whose content changed
	// metacontroller are Metacontroller's revisions of the parent, now
	// among revs as uc's: deleted once those are saved.
	metacontroller []*unstructured.Unstructured
	// children are the desired children: the latest reply's, but children
	// still on an older revision as that revision's reply wants them.
	children []*unstructured.Unstructured
	// keep are children on a revision whose reply is missing from the batch
	// (the watcher had not seen that revision yet): left as they are.
	keep            map[childID]bool
	reason, message string
}

// candidate is a child on an older revision, waiting to move to the latest.
type candidate struct {
	child *core.Child
	name  string
	from  *revision.Revision
	// want is the latest reply's object, nil when the latest revision does
	// not want the child: moving it deletes it.
	want *unstructured.Unstructured
	// old is the object the child's own revision wants, nil if none.
	old *unstructured.Unstructured
}

// planRollout works out the next step of a parent's rollout. revs are its
// ControllerRevisions, replies the hook's replies by revision hash, the
// latest's among them. It writes nothing.
func planRollout(ctl *core.Controller, parent *unstructured.Unstructured, latestPatch map[string]any, latestHash string, revs []*revision.Revision, replies map[string]*hooks.SyncResponse, live liveObjects) (*rollout, error) {
	ro := &rollout{revs: revs, changed: map[string]bool{}, keep: map[childID]bool{}}
	if err := ro.findLatest(ctl, parent, latestPatch, latestHash); err != nil {
		return nil, err
	}
	ns := parent.GetNamespace()
	id := func(c *core.Child, name string) childID { return childID{c.GVR.String(), ns, name} }

	// The latest reply: children of kinds that do not roll, and rolling
	// children on the latest revision or on none (new ones join the latest),
	// are desired as it says. The others are candidates to move.
	var moves []candidate
	latestWants := map[childID]*unstructured.Unstructured{}
	for _, d := range replies[latestHash].Children {
		child, ok := ctl.Child(d.GetAPIVersion(), d.GetKind())
		if !ok || !child.Rolling() {
			ro.children = append(ro.children, d) // plan rejects undeclared kinds
			continue
		}
		latestWants[id(child, d.GetName())] = d
		switch on := ro.of(child, d.GetName()); on {
		case nil, ro.latest:
			ro.put(ro.latest, child, d.GetName())
			ro.children = append(ro.children, d)
		default:
			moves = append(moves, candidate{child: child, name: d.GetName(), from: on, want: d})
		}
	}
	// Children the latest revision no longer wants leave it.
	for _, ch := range ro.onRevision(ctl, ro.latest) {
		if latestWants[id(ch.child, ch.name)] == nil {
			ro.take(ro.latest, ch.child, ch.name)
		}
	}

	// Children on older revisions, as their revision's reply wants them.
	for _, rev := range revs {
		if rev == ro.latest {
			continue
		}
		resp := replies[rev.Hash]
		for _, ch := range ro.onRevision(ctl, rev) {
			if ro.of(ch.child, ch.name) != rev {
				continue // on a newer revision too: that one counts
			}
			cid := id(ch.child, ch.name)
			if resp == nil {
				ro.keep[cid] = true
				continue
			}
			old := find(resp, ch.child, ch.name)
			i := slices.IndexFunc(moves, func(c candidate) bool { return c.child == ch.child && c.name == ch.name })
			switch {
			case old == nil && i >= 0: // its revision dropped it: it joins the latest at once
				ro.take(rev, ch.child, ch.name)
				ro.put(ro.latest, ch.child, ch.name)
				ro.children = append(ro.children, moves[i].want)
				moves = slices.Delete(moves, i, i+1)
			case old == nil:
				ro.take(rev, ch.child, ch.name)
			case i >= 0:
				moves[i].old = old
			default: // wanted by its revision only: moving it deletes it
				moves = append(moves, candidate{child: ch.child, name: ch.name, from: rev, old: old})
			}
		}
	}

	ro.step(ctl, parent, moves, latestWants, live)
	for _, c := range moves {
		if c.from != nil && c.old != nil {
			ro.children = append(ro.children, c.old)
		}
	}
	return ro, nil
}

// findLatest finds the latest revision among revs, or makes it. A parent
// set back to an older revision makes that one the newest again.
func (ro *rollout) findLatest(ctl *core.Controller, parent *unstructured.Unstructured, patch map[string]any, hash string) error {
	revision.Sort(ro.revs)
	var newest int64
	if n := len(ro.revs); n > 0 {
		newest = ro.revs[n-1].Revision
	}
	for _, rev := range ro.revs {
		if rev.Hash == hash {
			ro.latest = rev
		}
	}
	created := ro.latest == nil
	if created {
		rev, err := newRevision(ctl, parent, patch, hash)
		if err != nil {
			return err
		}
		ro.latest = rev
		ro.revs = append(ro.revs, rev)
	}
	if ro.revs[len(ro.revs)-1] != ro.latest || created {
		ro.latest.Revision = newest + 1
		ro.changed[ro.latest.Name] = true
		revision.Sort(ro.revs)
	}
	return nil
}

// newRevision is a parent's revision of that patch and hash, with no child
// on it yet, not created yet.
func newRevision(ctl *core.Controller, parent *unstructured.Unstructured, patch map[string]any, hash string) (*revision.Revision, error) {
	raw, err := json.Marshal(patch)
	if err != nil {
		return nil, fmt.Errorf("encode the parent's revision: %w", err)
	}
	return &revision.Revision{Hash: hash, ControllerRevision: &v1alpha1.ControllerRevision{
		TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.Group + "/" + v1alpha1.Version, Kind: "ControllerRevision"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            revision.Name(parent.GetName(), hash),
			Namespace:       parent.GetNamespace(),
			Labels:          revisionLabels(ctl, parent, hash),
			OwnerReferences: []metav1.OwnerReference{ownerRef(ctl, parent)},
		},
		ParentPatch: runtime.RawExtension{Raw: raw},
	}}, nil
}

func revisionLabels(ctl *core.Controller, parent *unstructured.Unstructured, hash string) map[string]string {
	lbls := map[string]string{
		v1alpha1.LabelRevisionParentUID: string(parent.GetUID()),
		revision.LabelHash:              hash,
	}
	// The labels for people are left out where their value cannot be a
	// label's: a parent's name over 63 characters, a controller served
	// from Metacontroller's API (cc=<name>, shown as cc.<name>).
	for key, value := range map[string]string{
		v1alpha1.LabelRevisionController:     strings.ReplaceAll(ctl.Name, "=", "."),
		v1alpha1.LabelRevisionParentName:     parent.GetName(),
		v1alpha1.LabelRevisionParentResource: ctl.Parent.GVR.GroupResource().String(),
	} {
		if len(validation.IsValidLabelValue(value)) == 0 {
			lbls[key] = value
		}
	}
	return lbls
}

// step moves the first candidate to the latest revision when every rolling
// child already on it is as the latest reply wants it (wants) and passes
// its status checks, and sets the Updated condition's reason and message.
func (ro *rollout) step(ctl *core.Controller, parent *unstructured.Unstructured, moves []candidate, wants map[childID]*unstructured.Unstructured, live liveObjects) {
	if len(moves) == 0 {
		ro.reason, ro.message = v1alpha1.ReasonOnLatestRevision, "every child is on the latest revision"
		return
	}
	ns := parent.GetNamespace()
	for _, ch := range ro.onRevision(ctl, ro.latest) {
		cur, ok := live.get(ch.child, ns, ch.name)
		if !ok || !updated(ctl, parent, ch.child, cur, wants[childID{ch.child.GVR.String(), ns, ch.name}]) || !passes(ch.child, cur) {
			ro.reason = v1alpha1.ReasonRolloutWaiting
			ro.message = fmt.Sprintf("%d children to update; waiting for %s %s on the latest revision to be updated and pass its status checks", len(moves), ch.child.GVK.Kind, ch.name)
			return
		}
	}
	c := &moves[0]
	ro.put(ro.latest, c.child, c.name) // before take: a crash between the two writes leaves it on the newer one
	ro.take(c.from, c.child, c.name)
	// Kept as it was while its revision had no reply: it moves now.
	delete(ro.keep, childID{c.child.GVR.String(), ns, c.name})
	if c.want != nil {
		ro.children = append(ro.children, c.want)
	} else {
		ro.take(ro.latest, c.child, c.name)
	}
	ro.reason = v1alpha1.ReasonRolloutProgressing
	ro.message = fmt.Sprintf("updating %s %s; %d more to update", c.child.GVK.Kind, c.name, len(moves)-1)
	c.from, c.old = nil, nil
}

// updated tells a child on the latest revision that no longer needs a
// write to be as the latest reply wants it (want): the move that put it
// there may have been saved without its write (a crash in between, or a
// cache that has not seen the write yet), and the next child waits for it.
func updated(ctl *core.Controller, parent *unstructured.Unstructured, child *core.Child, cur, want *unstructured.Unstructured) bool {
	if want == nil {
		return false
	}
	// A copy: desiredObject changes the object it is given, and want is
	// the reply's, which plan makes into its write afterwards.
	obj, err := desiredObject(ctl, parent, child, want.DeepCopy(), ownerRef(ctl, parent))
	if err != nil {
		return false // plan rejects the reply
	}
	_, write := update(child, cur, obj)
	return !write
}

// passes tells a child that passes its kind's status checks; a
// RollingInPlace child must also have observed its latest generation.
func passes(child *core.Child, cur *unstructured.Unstructured) bool {
	if cur.GetDeletionTimestamp() != nil {
		return false
	}
	conditions, _, _ := unstructured.NestedSlice(cur.Object, "status", "conditions")
	for _, check := range child.StatusChecks {
		c := findCondition(conditions, check.Type)
		if c == nil || check.Status != nil && c["status"] != *check.Status || check.Reason != nil && c["reason"] != *check.Reason {
			return false
		}
	}
	if child.Method == v1alpha1.ChildUpdateRollingInPlace {
		if og, found, _ := unstructured.NestedInt64(cur.Object, "status", "observedGeneration"); found && og < cur.GetGeneration() {
			return false
		}
	}
	return true
}

// named is one child named on a revision.
type named struct {
	child *core.Child
	name  string
}

// onRevision lists the rolling children on rev, of kinds the controller
// still declares.
func (ro *rollout) onRevision(ctl *core.Controller, rev *revision.Revision) []named {
	var out []named
	for _, rc := range rev.Children {
		for i := range ctl.Children {
			child := &ctl.Children[i]
			if child.Rolling() && child.GVK.Group == rc.APIGroup && child.GVK.Kind == rc.Kind {
				for _, name := range rc.Names {
					out = append(out, named{child, name})
				}
			}
		}
	}
	return out
}

func (ro *rollout) of(child *core.Child, name string) *revision.Revision {
	return revision.Of(ro.revs, child.GVK.Group, child.GVK.Kind, name)
}

func (ro *rollout) put(rev *revision.Revision, child *core.Child, name string) {
	if rev.Add(child.GVK.Group, child.GVK.Kind, name) {
		ro.changed[rev.Name] = true
	}
}

func (ro *rollout) take(rev *revision.Revision, child *core.Child, name string) {
	if rev.Remove(child.GVK.Group, child.GVK.Kind, name) {
		ro.changed[rev.Name] = true
	}
}

// find returns the object of that kind and name a reply wants, or nil.
func find(resp *hooks.SyncResponse, child *core.Child, name string) *unstructured.Unstructured {
	for _, d := range resp.Children {
		if d.GetName() == name && d.GetKind() == child.GVK.Kind && d.GetAPIVersion() == child.APIVersion() {
			return d
		}
	}
	return nil
}

// unused are the older revisions no child is on any more.
func (ro *rollout) unused() []*revision.Revision {
	var out []*revision.Revision
	for _, rev := range ro.revs {
		if rev != ro.latest && !rev.HasChildren() {
			out = append(out, rev)
		}
	}
	return out
}

// keepOnly drops the deletes of children left as they are.
func (ro *rollout) keepOnly(actions []action) []action {
	return slices.DeleteFunc(actions, func(act action) bool {
		return act.verb == verbDelete && ro.keep[idOf(act.child, act.obj)]
	})
}

func (ro *rollout) condition(generation int64) metav1.Condition {
	status := metav1.ConditionFalse
	if ro.reason == v1alpha1.ReasonOnLatestRevision {
		status = metav1.ConditionTrue
	}
	return condition(v1alpha1.ConditionUpdated, generation, status, ro.reason, ro.message)
}

// rollout works out the next step of the parent's rollout from the replies
// of each of its revisions. Its errors are worth a retry: the replies were
// computed from another revision of the parent than the one this replica's
// cache holds (a newer reply or a fresher cache resolves it), or the
// apiserver failed.
func (rc *reconciler) rollout(ctx context.Context, ctl *core.Controller, parent *unstructured.Unstructured, m bus.Meta, replies map[string]*hooks.SyncResponse) (*rollout, error) {
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
		if revs, imported, err = importRevisions(ctl, parent, revs, mc); err != nil {
			return nil, err
		}
	}
	ro, err := planRollout(ctl, parent, patch, hash, revs, replies, cacheLookup{rc.reg})
	if err != nil {
		return nil, err
	}
	for _, name := range imported {
		ro.changed[name] = true
	}
	ro.metacontroller = mc
	return ro, nil
}

// revisions lists a parent's ControllerRevisions from the apiserver, not
// from a cache: the step must start from the progress last written.
func (rc *reconciler) revisions(ctx context.Context, parent *unstructured.Unstructured) ([]*revision.Revision, error) {
	list, err := rc.dyn.Resource(v1alpha1.RevisionResource).Namespace(parent.GetNamespace()).List(ctx, metav1.ListOptions{
		LabelSelector: labels.Set{v1alpha1.LabelRevisionParentUID: string(parent.GetUID())}.String(),
	})
	if err != nil {
		return nil, fmt.Errorf("list the revisions of %s: %w", objectKey(parent), err)
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
func (rc *reconciler) saveRevisions(ctx context.Context, ro *rollout) error {
	res := rc.dyn.Resource(v1alpha1.RevisionResource).Namespace(ro.latest.Namespace)
	order := append([]*revision.Revision{ro.latest}, ro.revs...)
	unused := ro.unused()
	done := map[string]bool{}
	for _, rev := range order {
		if !ro.changed[rev.Name] || done[rev.Name] || slices.Contains(unused, rev) {
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
	return rc.deleteMetacontrollerRevisions(ctx, ro.metacontroller)
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
