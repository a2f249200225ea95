package core

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"universalcontroller.dev/uc/internal/revision"
	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// Rollout is one step of a parent's rolling update: which revision each
// child is on, the one child that moves to the latest revision in this step
// (if the children already there pass their status checks), and the desired
// children, each as its own revision's reply wants it.
type Rollout struct {
	Revisions []*revision.Revision // oldest first; latest is among them
	Latest    *revision.Revision
	Changed   map[string]bool // names of revisions whose content changed
	// Metacontroller are Metacontroller's revisions of the parent, now
	// among revs as uc's: deleted once those are saved.
	Metacontroller []*unstructured.Unstructured
	// Children are the desired children: the latest reply's, but children
	// still on an older revision as that revision's reply wants them.
	Children []*unstructured.Unstructured
	// keep are children on a revision whose reply is missing from the batch
	// (the watcher had not seen that revision yet): left as they are.
	keep            map[ChildID]bool
	reason, message string
}

// candidate is a child on an older revision, waiting to move to the latest.
type candidate struct {
	child *Child
	name  string
	from  *revision.Revision
	// want is the latest reply's object, nil when the latest revision does
	// not want the child: moving it deletes it.
	want *unstructured.Unstructured
	// old is the object the child's own revision wants, nil if none.
	old *unstructured.Unstructured
}

// PlanRollout works out the next step of a parent's rollout. revs are its
// ControllerRevisions, replies the hook's replies by revision hash, the
// latest's among them. It writes nothing.
func PlanRollout(ctl *Controller, parent *unstructured.Unstructured, latestPatch map[string]any, latestHash string, revs []*revision.Revision, replies map[string]*hooks.SyncResponse, cache Cache) (*Rollout, error) {
	live := cacheLookup{cache}
	ro := &Rollout{Revisions: revs, Changed: map[string]bool{}, keep: map[ChildID]bool{}}
	if err := ro.findLatest(ctl, parent, latestPatch, latestHash); err != nil {
		return nil, err
	}
	ns := parent.GetNamespace()
	id := func(c *Child, name string) ChildID { return ChildID{c.GVR, ns, name} }

	// The latest reply: children of kinds that do not roll, and rolling
	// children on the latest revision or on none (new ones join the latest),
	// are desired as it says. The others are candidates to move.
	var moves []candidate
	latestWants := map[ChildID]*unstructured.Unstructured{}
	for _, d := range replies[latestHash].Children {
		child, ok := ctl.Child(d.GetAPIVersion(), d.GetKind())
		if !ok || !child.Rolling() {
			ro.Children = append(ro.Children, d) // plan rejects undeclared kinds
			continue
		}
		latestWants[id(child, d.GetName())] = d
		switch on := ro.of(child, d.GetName()); on {
		case nil, ro.Latest:
			ro.put(ro.Latest, child, d.GetName())
			ro.Children = append(ro.Children, d)
		default:
			moves = append(moves, candidate{child: child, name: d.GetName(), from: on, want: d})
		}
	}
	// Children the latest revision no longer wants leave it.
	for _, ch := range ro.OnRevision(ctl, ro.Latest) {
		if latestWants[id(ch.child, ch.name)] == nil {
			ro.take(ro.Latest, ch.child, ch.name)
		}
	}

	// Children on older revisions, as their revision's reply wants them.
	for _, rev := range revs {
		if rev == ro.Latest {
			continue
		}
		resp := replies[rev.Hash]
		for _, ch := range ro.OnRevision(ctl, rev) {
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
				ro.put(ro.Latest, ch.child, ch.name)
				ro.Children = append(ro.Children, moves[i].want)
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
			ro.Children = append(ro.Children, c.old)
		}
	}
	return ro, nil
}

// findLatest finds the latest revision among revs, or makes it. A parent
// set back to an older revision makes that one the newest again.
func (ro *Rollout) findLatest(ctl *Controller, parent *unstructured.Unstructured, patch map[string]any, hash string) error {
	revision.Sort(ro.Revisions)
	var newest int64
	if n := len(ro.Revisions); n > 0 {
		newest = ro.Revisions[n-1].Revision
	}
	for _, rev := range ro.Revisions {
		if rev.Hash == hash {
			ro.Latest = rev
		}
	}
	created := ro.Latest == nil
	if created {
		rev, err := newRevision(ctl, parent, patch, hash)
		if err != nil {
			return err
		}
		ro.Latest = rev
		ro.Revisions = append(ro.Revisions, rev)
	}
	if ro.Revisions[len(ro.Revisions)-1] != ro.Latest || created {
		ro.Latest.Revision = newest + 1
		ro.Changed[ro.Latest.Name] = true
		revision.Sort(ro.Revisions)
	}
	return nil
}

// newRevision is a parent's revision of that patch and hash, with no child
// on it yet, not created yet.
func newRevision(ctl *Controller, parent *unstructured.Unstructured, patch map[string]any, hash string) (*revision.Revision, error) {
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

func revisionLabels(ctl *Controller, parent *unstructured.Unstructured, hash string) map[string]string {
	lbls := map[string]string{
		v1alpha1.LabelRevisionParentUID: string(parent.GetUID()),
		revision.LabelHash:              hash,
	}
	if value, ok := ctl.PartitionOf(parent); ok {
		lbls[v1alpha1.LabelPartition] = value
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
func (ro *Rollout) step(ctl *Controller, parent *unstructured.Unstructured, moves []candidate, wants map[ChildID]*unstructured.Unstructured, live liveObjects) {
	if len(moves) == 0 {
		ro.reason, ro.message = v1alpha1.ReasonOnLatestRevision, "every child is on the latest revision"
		return
	}
	ns := parent.GetNamespace()
	for _, ch := range ro.OnRevision(ctl, ro.Latest) {
		cur, ok := live.get(ch.child, ns, ch.name)
		if !ok || !updated(ctl, parent, ch.child, cur, wants[ChildID{ch.child.GVR, ns, ch.name}]) || !passes(ch.child, cur) {
			ro.reason = v1alpha1.ReasonRolloutWaiting
			ro.message = fmt.Sprintf("%d children to update; waiting for %s %s on the latest revision to be updated and pass its status checks", len(moves), ch.child.GVK.Kind, ch.name)
			return
		}
	}
	c := &moves[0]
	ro.put(ro.Latest, c.child, c.name) // before take: a crash between the two writes leaves it on the newer one
	ro.take(c.from, c.child, c.name)
	// Kept as it was while its revision had no reply: it moves now.
	delete(ro.keep, ChildID{c.child.GVR, ns, c.name})
	if c.want != nil {
		ro.Children = append(ro.Children, c.want)
	} else {
		ro.take(ro.Latest, c.child, c.name)
	}
	ro.reason = v1alpha1.ReasonRolloutProgressing
	ro.message = fmt.Sprintf("updating %s %s; %d more to update", c.child.GVK.Kind, c.name, len(moves)-1)
	c.from, c.old = nil, nil
}

// updated tells a child on the latest revision that no longer needs a
// write to be as the latest reply wants it (want): the move that put it
// there may have been saved without its write (a crash in between, or a
// cache that has not seen the write yet), and the next child waits for it.
func updated(ctl *Controller, parent *unstructured.Unstructured, child *Child, cur, want *unstructured.Unstructured) bool {
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
func passes(child *Child, cur *unstructured.Unstructured) bool {
	if cur.GetDeletionTimestamp() != nil {
		return false
	}
	conditions, _, _ := unstructured.NestedSlice(cur.Object, "status", "conditions")
	for _, check := range child.StatusChecks {
		c := FindCondition(conditions, check.Type)
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
	child *Child
	name  string
}

// onRevision lists the rolling children on rev, of kinds the controller
// still declares.
func (ro *Rollout) OnRevision(ctl *Controller, rev *revision.Revision) []named {
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

func (ro *Rollout) of(child *Child, name string) *revision.Revision {
	return revision.Of(ro.Revisions, child.GVK.Group, child.GVK.Kind, name)
}

func (ro *Rollout) put(rev *revision.Revision, child *Child, name string) {
	if rev.Add(child.GVK.Group, child.GVK.Kind, name) {
		ro.Changed[rev.Name] = true
	}
}

func (ro *Rollout) take(rev *revision.Revision, child *Child, name string) {
	if rev.Remove(child.GVK.Group, child.GVK.Kind, name) {
		ro.Changed[rev.Name] = true
	}
}

// find returns the object of that kind and name a reply wants, or nil.
func find(resp *hooks.SyncResponse, child *Child, name string) *unstructured.Unstructured {
	for _, d := range resp.Children {
		if d.GetName() == name && d.GetKind() == child.GVK.Kind && d.GetAPIVersion() == child.APIVersion() {
			return d
		}
	}
	return nil
}

// unused are the older revisions no child is on any more.
func (ro *Rollout) Unused() []*revision.Revision {
	var out []*revision.Revision
	for _, rev := range ro.Revisions {
		if rev != ro.Latest && !rev.HasChildren() {
			out = append(out, rev)
		}
	}
	return out
}

// keepOnly drops the deletes of children left as they are.
func (ro *Rollout) KeepOnly(actions []Write) []Write {
	return slices.DeleteFunc(actions, func(act Write) bool {
		return act.Verb == VerbDelete && ro.keep[IDOf(act.Child, act.Object)]
	})
}

func (ro *Rollout) Condition(generation int64) metav1.Condition {
	status := metav1.ConditionFalse
	if ro.reason == v1alpha1.ReasonOnLatestRevision {
		status = metav1.ConditionTrue
	}
	return condition(v1alpha1.ConditionUpdated, generation, status, ro.reason, ro.message)
}
