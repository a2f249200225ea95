package watcher

import (
	"errors"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	"universalcontroller.dev/uc/internal/compact"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// uc's own report on a parent is no reason to call its hook again. The
// applier writes to a parent's status what it has to say about it — its
// conditions (Synced, Updated) and status.observedGeneration — and every
// write moves metadata.resourceVersion and metadata.managedFields. A
// parent's update that changed nothing else is not synced: otherwise a
// hook that fails would be called once more for each report of its
// failure, for ever (a Synced=False written, the parent changed, a new
// request, a new failure). Any other change of the parent, the status
// included (unless ignoreStatusChanges), is synced as Metacontroller
// syncs it, whoever made it — the hook's own status that the applier
// writes among them.
//
// Such an update tells something all the same: when uc reports a failure
// on the parent (Synced turns False, or says something else), the parent's
// last request failed, and its retry is due after the parent's backoff
// (see republisher).

// ucStatusFields are the fields of a parent's status that uc writes of
// its own.
var ucStatusFields = []string{"observedGeneration", "conditions"}

// ucConditions are the conditions uc sets on a parent.
var ucConditions = []string{v1alpha1.ConditionSynced, v1alpha1.ConditionUpdated}

// changedNotByUC is true for an update of a parent that changed more than
// what uc writes to report on it (and not for an informer's resync, which
// changes nothing).
func changedNotByUC(o, n *unstructured.Unstructured) bool {
	return changedRV(o, n) && !equalButUC(o.Object, n.Object)
}

// equalButUC tells two versions of a parent apart from what uc writes to
// report on it: its conditions and observedGeneration, and the
// resourceVersion and managedFields of every write.
func equalButUC(o, n map[string]any) bool {
	for _, k := range keysOf(o, n) {
		var same bool
		switch k {
		case "metadata":
			same = equalBut(asMap(o[k]), asMap(n[k]), "resourceVersion", "managedFields")
		case "status":
			os, ns := asMap(o[k]), asMap(n[k])
			same = equalBut(os, ns, ucStatusFields...) && equalConditionsButUC(os["conditions"], ns["conditions"])
		default:
			same = equality.Semantic.DeepEqual(o[k], n[k])
		}
		if !same {
			return false
		}
	}
	return true
}

// equalBut compares two maps but for the keys named; a missing map is an
// empty one.
func equalBut(o, n map[string]any, but ...string) bool {
	for _, k := range keysOf(o, n) {
		if !slices.Contains(but, k) && !equality.Semantic.DeepEqual(o[k], n[k]) {
			return false
		}
	}
	return true
}

// equalConditionsButUC compares two lists of conditions but for uc's own.
// What is not a list is compared whole.
func equalConditionsButUC(o, n any) bool {
	ol, ook := o.([]any)
	nl, nok := n.([]any)
	if !ook && o != nil || !nok && n != nil {
		return equality.Semantic.DeepEqual(o, n)
	}
	return equality.Semantic.DeepEqual(withoutUC(ol), withoutUC(nl)) // nil and empty are equal
}

// withoutUC is a list of conditions without uc's own.
func withoutUC(conditions []any) []any {
	return slices.DeleteFunc(slices.Clone(conditions), func(c any) bool {
		t, _ := asMap(c)["type"].(string)
		return slices.Contains(ucConditions, t)
	})
}

// failureReported tells an update in which uc reported a failure on the
// parent: its Synced condition turned False, or says another reason or
// message than before.
func failureReported(o, n *unstructured.Unstructured) bool {
	cur := synced(n)
	if cur == nil || cur["status"] != "False" {
		return false
	}
	old := synced(o)
	return old == nil || old["status"] != cur["status"] || old["reason"] != cur["reason"] || old["message"] != cur["message"]
}

// synced is the parent's Synced condition, or nil.
func synced(u *unstructured.Unstructured) map[string]any {
	list, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range list {
		if m, ok := c.(map[string]any); ok && m["type"] == v1alpha1.ConditionSynced {
			return m
		}
	}
	return nil
}

// parentHandler follows a controller's parents: a parent added, deleted,
// or changed as changed says, is synced at once, and its backoff starts
// again; an update that is uc's own report is not synced — it may end the
// wait for an apply's writes (see writeWaits), and when it reports a
// failure, it tells the republisher that the parent's last request failed. An
// update is decoded (the cache holds parents compact) unless it is an
// informer's resync.
func (w *Watcher) parentHandler(controller string, changed func(o, n *unstructured.Unstructured) bool) cache.ResourceEventHandler {
	sync := func(obj any) { w.enqueueParent(controller, obj) }
	return cache.ResourceEventHandlerFuncs{
		AddFunc: sync,
		UpdateFunc: func(oldObj, newObj any) {
			om, ok1 := compact.Meta(oldObj)
			nm, ok2 := compact.Meta(newObj)
			if !ok1 || !ok2 || !changedRV(om, nm) {
				return
			}
			o, oerr := compact.Decode(oldObj)
			n, nerr := compact.Decode(newObj)
			if err := errors.Join(oerr, nerr); err != nil {
				w.log.Error("decode a parent's update; syncing it", "controller", controller, "parent", cache.MetaObjectToName(nm).String(), "err", err)
				sync(newObj)
				return
			}
			if changed(o, n) {
				sync(n)
				return
			}
			key := parentKey{Controller: controller, Namespace: n.GetNamespace(), Name: n.GetName()}
			if failureReported(o, n) {
				w.republish.failed(key, "", time.Now())
			}
			// uc's own status may be the last write of an apply the
			// parent's syncs wait for.
			w.applying.check(key, w.seen)
		},
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			sync(obj)
		},
	}
}

func keysOf(maps ...map[string]any) []string {
	var out []string
	seen := map[string]bool{}
	for _, m := range maps {
		for k := range m {
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	return out
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}
