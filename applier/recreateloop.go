package applier

import (
	"fmt"
	"log/slog"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"universalcontroller.dev/uc/core"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// A child updated by Recreate (or RollingRecreate) is deleted, then made
// again, when it does not hold its desired state. When the desired state
// did not change since uc made the child (the plan's Write.Drift), someone
// changed the child: re-creating it heals that once, and the new child
// holds its desired state. But a field the apiserver sets on every new
// object — a default (a typed Service's targetPort 0 becomes its port), a
// mutating admission webhook — or one another writer rewrites at once is
// back on every new child: re-creating it loops, a child deleted and made
// again on every sync, forever.
//
// The plan alone cannot tell the two apart: the live child looks the same
// either way (uc's caches hold no managedFields, and many kinds have no
// generation to say the child was never changed). The applier tells them
// by what follows a re-creation: drift healed, the new child is seen
// holding its desired state (the apply plans no write for it); in a loop,
// the new child is re-created again for the same desired state. After
// maxRecreations such re-creations in a row, uc stops: it leaves the child
// as it is (Recreate was chosen because the kind may not take an update
// in place), records a Warning Event RecreateLoop naming the child and the
// field, and sets the parent's Synced condition to False with it; the
// parent's other children are written as usual. A new desired state (a
// new hash) is re-created again.
//
// The count lives in memory, with what the replica knows of the
// partition's parents (knownParents): a restart or a partition handed
// over loses it, which costs maxRecreations more re-creations before uc
// stops again.

// maxRecreations is how many re-creations in a row uc makes of a child
// for one desired state before it gives up. Drift healing takes one; the
// second allows for a hand edit racing the first re-creation.
const maxRecreations = 2

// recreation counts the re-creations of one child in a row.
type recreation struct {
	hash  string    // of the desired state re-created
	uid   types.UID // of the last child deleted to re-create it
	count int       // re-creations for hash, each of another child
	child *core.Child
	// namespace and name are the child's, to look it up when a later apply
	// plans no write for it.
	namespace, name string
}

// looping is a child left as it is: its re-creation for the same desired
// state would loop.
type looping struct {
	write core.Write
	count int
	// tripped is true on the apply that gave up: the one that reports it.
	tripped bool
}

// holdRecreateLoops returns the writes to make of those planned for the
// parent with that apply key, less the re-creations that would loop, which
// it returns too. It counts the re-creations of each child for one desired
// state in a row: a re-creation of another desired state, or of a drift
// seen healed, starts again at one. An apply that plans no write for a
// child counted ends its count (it holds its desired state, or is no
// longer desired), unless the child is still being deleted (a finalizer, a
// Pod's grace period): its re-creation is under way.
func (k *knownParents) holdRecreateLoops(key types.UID, writes []core.Write, live core.Cache) ([]core.Write, []looping) {
	k.mu.Lock()
	defer k.mu.Unlock()
	last := k.recreated[key]
	if len(last) == 0 && !hasDrift(writes) {
		return writes, nil
	}
	next := map[core.ChildID]recreation{}
	keep := make([]core.Write, 0, len(writes))
	var held []looping
	for _, w := range writes {
		id := core.IDOf(w.Child, w.Object)
		before, counted := last[id]
		if w.Drift == "" {
			if counted && w.Verb == core.VerbCreate {
				next[id] = before // the re-creation's create
			}
			keep = append(keep, w)
			continue
		}
		r := recreation{hash: w.Object.GetAnnotations()[v1alpha1.AnnotationAppliedHash], uid: w.Object.GetUID(), count: 1,
			child: w.Child, namespace: w.Object.GetNamespace(), name: w.Object.GetName()}
		if counted && before.hash == r.hash {
			// The same child again (a cache behind its delete) is the same
			// re-creation.
			r.count = before.count
			if before.uid != r.uid {
				r.count++
			}
		}
		next[id] = r
		if r.count > maxRecreations {
			held = append(held, looping{write: w, count: r.count - 1, tripped: before.count <= maxRecreations})
			continue
		}
		keep = append(keep, w)
	}
	for id, r := range last {
		if _, written := next[id]; !written && beingDeleted(live, r) {
			next[id] = r
		}
	}
	if len(next) == 0 {
		delete(k.recreated, key)
	} else {
		k.recreated[key] = next
	}
	return keep, held
}

func hasDrift(writes []core.Write) bool {
	for _, w := range writes {
		if w.Drift != "" {
			return true
		}
	}
	return false
}

// beingDeleted tells whether the child r counts is still there, being
// deleted.
func beingDeleted(live core.Cache, r recreation) bool {
	obj, err := live.Object(r.child.GVR, r.namespace, r.name)
	return err == nil && obj.GetDeletionTimestamp() != nil
}

// reportRecreateLoops logs the children left as they are and records a
// Warning Event RecreateLoop on the parent for each the apply gave up on,
// and returns the message of the parent's Synced condition, "" when none
// is held.
func (rc *reconciler) reportRecreateLoops(ctl *core.Controller, parent *unstructured.Unstructured, held []looping, log *slog.Logger) string {
	messages := make([]string, 0, len(held))
	for _, h := range held {
		message := recreateLoopMessage(h)
		messages = append(messages, message)
		if h.tripped {
			log.Warn("re-creating a child would loop; left as it is", "child", h.write.String(), "drift", h.write.Drift)
			rc.warn(ctl, parent, v1alpha1.ReasonRecreateLoop, message)
		}
	}
	return strings.Join(messages, "; ")
}

// withSynced is conds with their Synced condition replaced by synced.
func withSynced(conds []metav1.Condition, synced metav1.Condition) []metav1.Condition {
	out := make([]metav1.Condition, 0, len(conds))
	for _, c := range conds {
		if c.Type != v1alpha1.ConditionSynced {
			out = append(out, c)
		}
	}
	return append(out, synced)
}

// recreateLoopMessage says which child is left as it is, why, and what to
// do.
func recreateLoopMessage(h looping) string {
	w := h.write
	return fmt.Sprintf("%s %s was re-created %d times for the same desired state and still differs from it (%s): "+
		"the apiserver (a default, a mutating admission webhook) or another writer sets it on every new %s. "+
		"uc leaves it as it is until the desired state changes: leave the field out of the desired object, or set it to the value the apiserver keeps "+
		"(uc render shows the difference)",
		kindOfWrite(w), core.ObjectKey(w.Object), h.count, w.Drift, kindOfWrite(w))
}

// kindOfWrite is the kind of a write's object, or its resource when the object
// does not say.
func kindOfWrite(w core.Write) string {
	if k := w.Object.GetKind(); k != "" {
		return k
	}
	return w.Child.GVR.Resource
}
