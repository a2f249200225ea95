package core

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"universalcontroller.dev/uc/internal/compact"
	"universalcontroller.dev/uc/internal/ujson"
	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// Verb is what a write does to a child.
type Verb string

const (
	VerbCreate  Verb = "create"  // create; never an update of an object already there
	VerbApply   Verb = "apply"   // update or adopt with server-side apply
	VerbDelete  Verb = "delete"  // delete, with a UID precondition
	VerbRelease Verb = "release" // drop the parent's ownerReference
)

// EventUpdated is the event of an in-place update of a child, which is
// not recorded on the parent (see recordWrites).
const EventUpdated = "Updated"

// Write is one write the applier makes to a child.
type Write struct {
	Verb  Verb
	Child *Child
	// Object is the object to apply, or the live object to delete or release.
	Object *unstructured.Unstructured
	// Adopt is set when the apply takes over an orphan.
	Adopt bool
	// Selector is the parent's selector, to judge an object found in the way of
	// a create.
	Selector labels.Selector
	// Live is the child an apply updates, as it was planned on: its
	// resourceVersion conditions the apply, and the preflight check judges
	// the write over it.
	Live *unstructured.Unstructured
	// Event is the reason of the Normal Event recorded on the parent.
	Event string
	// Drift is set on the delete of a re-creation (Event "Recreating") of a
	// child whose desired state did not change since uc made it — the live
	// child's applied hash is the desired one's — yet which no longer holds
	// it: the first field that differs, as Difference names it. Someone
	// changed the child, and re-creating it heals that; unless the
	// apiserver (a default, a mutating admission webhook) or another writer
	// puts the difference back on every new child, which the applier tells
	// by re-creations that follow one another for the same desired state.
	Drift string
}

func (a Write) String() string {
	return fmt.Sprintf("%s %s %s", a.Verb, a.Child.GVR.Resource, ObjectKey(a.Object))
}

func ObjectKey(o *unstructured.Unstructured) string {
	if o.GetNamespace() == "" {
		return o.GetName()
	}
	return o.GetNamespace() + "/" + o.GetName()
}

// ChildID identifies a child across kinds.
type ChildID struct {
	gvr             schema.GroupVersionResource
	namespace, name string
}

func IDOf(c *Child, o *unstructured.Unstructured) ChildID {
	return ChildID{c.GVR, o.GetNamespace(), o.GetName()}
}

// liveObjects finds a parent's live children.
type liveObjects interface {
	// owned lists the objects of a child resource in namespace ("" for all)
	// that owner controls.
	owned(c *Child, namespace string, owner types.UID) ([]*unstructured.Unstructured, error)
	// orphans lists the objects of a child resource in namespace ("" for
	// all) that nothing controls and sel matches.
	orphans(c *Child, namespace string, sel labels.Selector) ([]*unstructured.Unstructured, error)
	get(c *Child, namespace, name string) (*unstructured.Unstructured, bool)
}

// Plan turns a sync reply into the writes that make the cluster match it. It
// writes nothing, and it rejects the whole reply when any child is not one
// the controller may manage, so an invalid reply is never half-applied.
// The reply is plan's: each desired child becomes, in place, the object its
// write carries, so a reply of many children is held once (see
// desiredObject).
func Plan(ctl *Controller, parent *unstructured.Unstructured, resp *hooks.SyncResponse, cache Cache) ([]Write, error) {
	if err := resp.Validate(); err != nil {
		return nil, err
	}
	sel, err := ctl.Selector(parent)
	if err != nil {
		return nil, err
	}
	return planWrites(ctl, parent, resp.Children, children(sel, parent.GetUID()), cacheLookup{cache})
}

// A claim is how one kind of controller takes and lets go of objects: a
// UniversalController its children (children), a UniversalDecorator a
// decorated object's attachments (attachments, decoration.go).
type claim struct {
	// list and declaredIn are the reply's and the spec's fields, for
	// messages.
	list, declaredIn string
	// mark prepares an object of the reply, in place.
	mark func(*unstructured.Unstructured) *unstructured.Unstructured
	// refuse tells why a desired object may not be written, or nil.
	refuse func(obj *unstructured.Unstructured) error
	// sel judges an object found in the way of a create.
	sel labels.Selector
	// mayTake tells why an existing object of a desired name may not be
	// taken, or nil.
	mayTake func(cur *unstructured.Unstructured) error
	// letGo is what becomes of an owned object no longer desired: its
	// write, or false for an object that is not the claim's.
	letGo func(o *unstructured.Unstructured) (Verb, string, bool)
	// orphans are claimed too, with the selector: adopted when desired,
	// deleted when not.
	orphans bool
}

// children is a UniversalController's claim on a parent's children: the
// objects the parent's selector sel matches.
func children(sel labels.Selector, parent types.UID) claim {
	return claim{
		list: "children", declaredIn: "childResources",
		mark: func(o *unstructured.Unstructured) *unstructured.Unstructured { return o },
		refuse: func(obj *unstructured.Unstructured) error {
			if !sel.Matches(LabelsOf(obj)) {
				return fmt.Errorf("labels %v do not match the parent's selector %q", obj.GetLabels(), sel.String())
			}
			return nil
		},
		sel:     sel,
		mayTake: func(cur *unstructured.Unstructured) error { return MayManage(cur, parent, sel) },
		letGo: func(o *unstructured.Unstructured) (Verb, string, bool) {
			if !sel.Matches(LabelsOf(o)) {
				return VerbRelease, "Released", true
			}
			return VerbDelete, "Deleted", true
		},
		orphans: true,
	}
}

// planWrites turns the objects of a reply into the writes that make the
// parent's objects of claim c match them (see Plan).
func planWrites(ctl *Controller, parent *unstructured.Unstructured, objs []*unstructured.Unstructured, c claim, live liveObjects) ([]Write, error) {
	owner := ownerRef(ctl, parent)
	// The parent's objects, decoded once: a desired child is most often
	// one of them.
	owned := make([][]*unstructured.Unstructured, len(ctl.Children))
	ownedByID := map[ChildID]*unstructured.Unstructured{}
	for i := range ctl.Children {
		child := &ctl.Children[i]
		// A namespaced parent's children are in its namespace: an object
		// elsewhere naming it as owner is not one (the garbage collector
		// deals with it).
		objs, err := live.owned(child, parent.GetNamespace(), parent.GetUID())
		if err != nil {
			return nil, err
		}
		owned[i] = objs
		for _, o := range objs {
			ownedByID[IDOf(child, o)] = o
		}
	}
	desired := map[ChildID]bool{}
	var actions []Write
	for i, d := range objs {
		child, obj, err := desire(ctl, parent, c.mark(d), owner, desired, c.declaredIn)
		if err == nil {
			err = c.refuse(obj)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", listed(c.list, i, d), err)
		}
		cur, exists := ownedByID[IDOf(child, obj)]
		if !exists {
			cur, exists = live.get(child, obj.GetNamespace(), obj.GetName())
		}
		if !exists {
			actions = append(actions, Write{Verb: VerbCreate, Child: child, Object: obj, Selector: c.sel, Event: "Created"})
			continue
		}
		if err := c.mayTake(cur); err != nil {
			return nil, fmt.Errorf("%s: %w", listed(c.list, i, d), err)
		}
		if a, ok := update(child, cur, obj); ok {
			actions = append(actions, a)
		}
	}
	for i := range ctl.Children {
		child := &ctl.Children[i]
		for _, o := range owned[i] {
			if desired[IDOf(child, o)] || o.GetDeletionTimestamp() != nil {
				continue
			}
			if verb, event, ok := c.letGo(o); ok {
				actions = append(actions, Write{Verb: verb, Child: child, Object: o, Event: event})
			}
		}
		if !c.orphans {
			continue
		}
		// Orphans the selector claims were observed as children: those not
		// desired are deleted, after the same check as an adoption.
		ns := ""
		if ctl.Parent.Namespaced {
			ns = parent.GetNamespace()
		}
		orphans, err := live.orphans(child, ns, c.sel)
		if err != nil {
			return nil, err
		}
		for _, o := range orphans {
			if !desired[IDOf(child, o)] {
				actions = append(actions, Write{Verb: VerbDelete, Child: child, Object: o, Adopt: true, Event: "Deleted"})
			}
		}
	}
	return actions, nil
}

// listed names the object d of a reply, the i-th of its field list, in an
// error. (Only then: naming every object of a reply of thousands costs.)
func listed(list string, i int, d *unstructured.Unstructured) string {
	return fmt.Sprintf("%s[%d] %s %q", list, i, hooks.GroupKey(d.GetKind(), d.GetAPIVersion()), d.GetName())
}

// desire resolves one object of a reply: its kind, which must be declared
// (in the spec field declaredIn), and the object to apply, controlled by
// owner. It records the object in desired, and fails for an object listed
// twice.
func desire(ctl *Controller, parent, d *unstructured.Unstructured, owner metav1.OwnerReference, desired map[ChildID]bool, declaredIn string) (*Child, *unstructured.Unstructured, error) {
	child, ok := ctl.Child(d.GetAPIVersion(), d.GetKind())
	if !ok {
		return nil, nil, fmt.Errorf("kind not declared in %s", declaredIn)
	}
	obj, err := desiredObject(ctl, parent, child, d, owner)
	if err != nil {
		return nil, nil, err
	}
	id := IDOf(child, obj)
	if desired[id] {
		return nil, nil, fmt.Errorf("listed twice")
	}
	desired[id] = true
	return child, obj, nil
}

// MayManage tells why a parent may not manage an existing object named as
// one of its children: another owner controls it, or nothing does and the
// parent's selector does not match it. It judges the live object, never the
// hook's desired copy (which uc labels for the parent), so a hook cannot
// make uc take over an object it could not adopt anyway.
func MayManage(cur *unstructured.Unstructured, parent types.UID, sel labels.Selector) error {
	ref := metav1.GetControllerOfNoCopy(cur)
	switch {
	case ref != nil && ref.UID != parent:
		return fmt.Errorf("an object of that name exists and is already controlled by %s %s: uc does not take it over", ref.Kind, ref.Name)
	case ref == nil && !sel.Matches(LabelsOf(cur)):
		return fmt.Errorf("an object of that name exists, is controlled by no one and its labels %v do not match the parent's selector %q: uc does not take it over", cur.GetLabels(), sel.String())
	}
	return nil
}

// update decides what, if anything, brings an existing child to its desired
// state under the child's update method. A child differs when the desired
// object changed since it was last applied (its hash annotation, if uc
// applied it) or when a field the controller sets has another value;
// defaults and fields written by others never count.
func update(child *Child, cur, want *unstructured.Unstructured) (Write, bool) {
	// The caller checked that cur is the parent's, or an orphan it may adopt.
	if metav1.GetControllerOfNoCopy(cur) == nil {
		if cur.GetDeletionTimestamp() != nil {
			return Write{}, false // created again once it is gone
		}
		return Write{Verb: VerbApply, Child: child, Object: want, Adopt: true, Event: "Adopted", Live: cur}, true
	}
	// A child uc never applied (Metacontroller made it, say) has no hash:
	// it is the same when it holds every desired field.
	hash, applied := appliedHash(cur)
	wantHash, _ := appliedHash(want)
	same := (!applied || hash == wantHash) && Contains(cur.Object, comparable(want).Object)
	switch {
	case same, child.Method == v1alpha1.ChildUpdateOnDelete:
		return Write{}, false
	case child.Method == v1alpha1.ChildUpdateRecreate || child.Method == v1alpha1.ChildUpdateRollingRecreate:
		if cur.GetDeletionTimestamp() != nil {
			return Write{}, false
		}
		w := Write{Verb: VerbDelete, Child: child, Object: cur, Event: "Recreating"}
		if applied && hash == wantHash {
			w.Drift = Difference(cur.Object, comparable(want).Object)
		}
		return w, true
	}
	// InPlace and RollingInPlace.
	return Write{Verb: VerbApply, Child: child, Object: want, Event: EventUpdated, Live: cur}, true
}

// desiredObject makes d, a desired child, the object to apply: in the
// parent's namespace, controlled by the parent, without server-owned
// fields. It changes d itself, not a copy, and returns it: a reply is
// decoded for one apply, and a reply of a thousand children held twice —
// as decoded and as written — would cost twice the memory.
func desiredObject(ctl *Controller, parent *unstructured.Unstructured, child *Child, obj *unstructured.Unstructured, owner metav1.OwnerReference) (*unstructured.Unstructured, error) {
	switch {
	case !child.Namespaced:
		if ctl.Parent.Namespaced {
			return nil, fmt.Errorf("a cluster-scoped child cannot belong to a namespaced parent")
		}
		obj.SetNamespace("")
	case ctl.Parent.Namespaced:
		if ns := obj.GetNamespace(); ns != "" && ns != parent.GetNamespace() {
			return nil, fmt.Errorf("namespace %q is outside the parent's namespace %q", ns, parent.GetNamespace())
		}
		obj.SetNamespace(parent.GetNamespace())
	case obj.GetNamespace() == "":
		return nil, fmt.Errorf("metadata.namespace is required for a namespaced child of a cluster-scoped parent")
	}
	for _, f := range []string{"uid", "resourceVersion", "generation", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "managedFields", "selfLink"} {
		unstructured.RemoveNestedField(obj.Object, "metadata", f)
	}
	unstructured.RemoveNestedField(obj.Object, "status")
	if ctl.Spec.GenerateSelector != nil && *ctl.Spec.GenerateSelector {
		lbls := obj.GetLabels()
		if lbls == nil {
			lbls = map[string]string{}
		}
		lbls[v1alpha1.LabelControllerUID] = string(parent.GetUID())
		obj.SetLabels(lbls)
	}
	refs := []metav1.OwnerReference{owner}
	for _, r := range obj.GetOwnerReferences() {
		if r.UID != owner.UID && (r.Controller == nil || !*r.Controller) {
			refs = append(refs, r)
		}
	}
	if err := unstructured.SetNestedSlice(obj.Object, compact.OwnerReferences(refs), "metadata", "ownerReferences"); err != nil {
		return nil, err
	}
	if err := setAppliedHash(obj); err != nil {
		return nil, err
	}
	ctl.labelPartition(obj, parent)
	return obj, nil
}

// setAppliedHash stamps obj with the hash of its content: of its JSON as
// json.Marshal writes it (maps with sorted keys).
func setAppliedHash(obj *unstructured.Unstructured) error {
	unstructured.RemoveNestedField(obj.Object, "metadata", "annotations", v1alpha1.AnnotationAppliedHash)
	h := sha256.New()
	if err := ujson.Write(h, obj.Object); err != nil {
		return err
	}
	hash := hex.EncodeToString(h.Sum(nil)[:12])
	switch annotations, found, _ := unstructured.NestedFieldNoCopy(obj.Object, "metadata", "annotations"); m := annotations.(type) {
	case map[string]any:
		m[v1alpha1.AnnotationAppliedHash] = hash
		return nil
	case nil:
		if !found {
			return unstructured.SetNestedField(obj.Object, hash, "metadata", "annotations", v1alpha1.AnnotationAppliedHash)
		}
	}
	// null, or not a map: the hash becomes the only annotation.
	annotations := obj.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[v1alpha1.AnnotationAppliedHash] = hash
	obj.SetAnnotations(annotations)
	return nil
}

// appliedHash is the applied hash o is stamped with, read in place (its
// GetAnnotations copies every annotation).
func appliedHash(o *unstructured.Unstructured) (string, bool) {
	hash, ok, _ := unstructured.NestedString(o.Object, "metadata", "annotations", v1alpha1.AnnotationAppliedHash)
	return hash, ok
}

func ownerRef(ctl *Controller, parent *unstructured.Unstructured) metav1.OwnerReference {
	yes := true
	return metav1.OwnerReference{
		APIVersion:         ctl.Parent.APIVersion(),
		Kind:               ctl.Parent.GVK.Kind,
		Name:               parent.GetName(),
		UID:                parent.GetUID(),
		Controller:         &yes,
		BlockOwnerDeletion: &yes,
	}
}

// comparable is a desired object without what update compares apart: its
// owner (checked before), its hash annotation and its partition label
// (labelPartition). It copies only the maps on the way to those fields:
// the rest is o's, to be read, not changed.
func comparable(o *unstructured.Unstructured) *unstructured.Unstructured {
	c := maps.Clone(o.Object)
	meta, ok := c["metadata"].(map[string]any)
	if !ok {
		return &unstructured.Unstructured{Object: c}
	}
	meta = maps.Clone(meta)
	delete(meta, "ownerReferences")
	if annotations, ok := meta["annotations"].(map[string]any); ok {
		annotations = maps.Clone(annotations)
		delete(annotations, v1alpha1.AnnotationAppliedHash)
		meta["annotations"] = annotations
	}
	if lbls, ok := meta["labels"].(map[string]any); ok {
		lbls = maps.Clone(lbls)
		delete(lbls, v1alpha1.LabelPartition)
		meta["labels"] = lbls
	}
	c["metadata"] = meta
	return &unstructured.Unstructured{Object: c}
}

// Contains reports whether every field set in want has the same value in
// live. Lists of values must be equal; lists of objects must hold every
// wanted object in order, others may come between; numbers compare by value;
// an empty or null wanted value matches an absent one.
func Contains(live, want any) bool {
	switch w := want.(type) {
	case map[string]any:
		l, ok := live.(map[string]any)
		if !ok {
			return len(w) == 0 && live == nil
		}
		for k, wv := range w {
			if !Contains(l[k], wv) {
				return false
			}
		}
		return true
	case []any:
		l, ok := live.([]any)
		if !ok {
			return len(w) == 0 && live == nil
		}
		if slices.ContainsFunc(w, func(v any) bool { _, obj := v.(map[string]any); return !obj }) {
			return slices.EqualFunc(l, w, Contains) // values: all of them, in order
		}
		// Objects: the apiserver and admission add entries of their own (a
		// service account token volume and its mounts, default
		// tolerations). Every wanted entry must be there, in order.
		j := 0
		for _, wv := range w {
			for j < len(l) && !Contains(l[j], wv) {
				j++
			}
			if j == len(l) {
				return false
			}
			j++
		}
		return true
	case nil:
		return true
	}
	if wf, ok := number(want); ok {
		lf, ok := number(live)
		return ok && (wf == lf || math.Abs(wf-lf) < 1e-9)
	}
	return reflect.DeepEqual(live, want)
}

// Difference names the first field, in the order of their paths, that want
// sets and live does not hold as Contains judges it: its path and both
// values ("spec.ports[0].targetPort: desired 0, live 80"), or "" when live
// contains want. A list of objects whose length differs is named whole.
func Difference(live, want any) string {
	path, l, w, differs := difference("", live, want)
	if !differs {
		return ""
	}
	if path == "" {
		path = "the object"
	}
	return fmt.Sprintf("%s: desired %s, live %s", path, brief(w), brief(l))
}

func difference(path string, live, want any) (string, any, any, bool) {
	if Contains(live, want) {
		return "", nil, nil, false
	}
	switch w := want.(type) {
	case map[string]any:
		if l, ok := live.(map[string]any); ok {
			for _, k := range slices.Sorted(maps.Keys(w)) {
				if p, lv, wv, differs := difference(fieldPath(path, k), l[k], w[k]); differs {
					return p, lv, wv, true
				}
			}
		}
	case []any:
		if l, ok := live.([]any); ok && len(l) == len(w) {
			for i := range w {
				if p, lv, wv, differs := difference(fmt.Sprintf("%s[%d]", path, i), l[i], w[i]); differs {
					return p, lv, wv, true
				}
			}
		}
	}
	return path, live, want, true
}

func fieldPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// brief is a value of Difference's, as JSON, cut short.
func brief(v any) string {
	if v == nil {
		return "unset"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	const most = 80
	if len(b) > most {
		return string(b[:most]) + "…"
	}
	return string(b)
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case int:
		return float64(n), true
	case int32:
		return float64(n), true
	case float64:
		return n, true
	}
	return 0, false
}

// cacheLookup reads children from a cache: the registry's shared
// informers.
type cacheLookup struct{ reg Cache }

func (c cacheLookup) owned(ch *Child, namespace string, owner types.UID) ([]*unstructured.Unstructured, error) {
	return c.reg.Owned(ch.GVR, namespace, owner)
}

func (c cacheLookup) orphans(ch *Child, namespace string, sel labels.Selector) ([]*unstructured.Unstructured, error) {
	objs, err := c.reg.Orphans(ch.GVR, namespace, sel)
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for _, u := range objs {
		if Adoptable(sel, u) {
			out = append(out, u)
		}
	}
	return out, nil
}

func (c cacheLookup) get(ch *Child, namespace, name string) (*unstructured.Unstructured, bool) {
	obj, err := c.reg.Object(ch.GVR, namespace, name)
	return obj, err == nil
}
