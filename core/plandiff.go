package core

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"reflect"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// Outcome is what one reply would make of a parent, as the comparison of a
// sync hook's reply with its shadow's sees it: the children it wants, as
// the objects uc would write, and the status and conditions it sets; or
// why it would be rejected.
type Outcome struct {
	Rejected *bus.Rejected
	// Children are by ChildKey.
	Children   map[string]*unstructured.Unstructured
	Status     map[string]any // nil: the reply leaves the status as it is
	Conditions []hooks.Condition
}

// ChildKey names a child in a ShadowDiff: "<Kind>.<apiVersion>
// <namespace>/<name>".
func ChildKey(o *unstructured.Unstructured) string {
	return hooks.GroupKey(o.GetKind(), o.GetAPIVersion()) + " " + ObjectKey(o)
}

// DiffOutcomes is how the shadow's outcome differs from the sync hook's,
// both replies to the request of that id. A reply that would be rejected
// is compared by its rejection only.
func DiffOutcomes(request string, sync, shadow Outcome) *bus.ShadowDiff {
	d := &bus.ShadowDiff{Request: request}
	if sync.Rejected != nil || shadow.Rejected != nil {
		if !reflect.DeepEqual(sync.Rejected, shadow.Rejected) {
			d.SyncRejected, d.ShadowRejected = sync.Rejected, shadow.Rejected
		}
	} else {
		for _, key := range slices.Sorted(maps.Keys(shadow.Children)) {
			if sync.Children[key] == nil {
				d.Added = append(d.Added, key)
			}
		}
		for _, key := range slices.Sorted(maps.Keys(sync.Children)) {
			want, shadowWants := sync.Children[key], shadow.Children[key]
			switch {
			case shadowWants == nil:
				d.Removed = append(d.Removed, key)
			case want.GetAnnotations()[v1alpha1.AnnotationAppliedHash] != shadowWants.GetAnnotations()[v1alpha1.AnnotationAppliedHash]:
				d.Changed = append(d.Changed, bus.ChildDiff{Child: key,
					Diff: unifiedDiff(withoutHash(want), withoutHash(shadowWants), hooks.Sync, hooks.SyncShadow)})
			}
		}
		d.Status = statusDiff(sync, shadow)
	}
	if !d.Empty() {
		d.Hash = diffHash(d)
	}
	return d
}

// withoutHash is an object uc would write without its applied-hash
// annotation, which a diff of two of them need not show.
func withoutHash(o *unstructured.Unstructured) map[string]any {
	c := comparable(o).Object // its owner too: the same parent's
	if meta, ok := c["metadata"].(map[string]any); ok {
		if a, ok := meta["annotations"].(map[string]any); ok && len(a) == 0 {
			delete(meta, "annotations")
		}
	}
	return c
}

// statusDiff lists the status fields, and the conditions, that two
// replies set differently: a status left as it is (nil) differs from one
// set.
func statusDiff(sync, shadow Outcome) []string {
	var paths []string
	if (sync.Status == nil) != (shadow.Status == nil) {
		paths = append(paths, "status")
	} else {
		paths = fieldDiff("status", sync.Status, shadow.Status, paths)
	}
	byType := func(conds []hooks.Condition) map[string]hooks.Condition {
		out := map[string]hooks.Condition{}
		for _, c := range conds {
			out[c.Type] = c
		}
		return out
	}
	a, b := byType(sync.Conditions), byType(shadow.Conditions)
	for _, typ := range slices.Sorted(maps.Keys(mergeKeys(a, b))) {
		if ca, okA := a[typ]; !okA || ca != b[typ] {
			paths = append(paths, "status.conditions["+typ+"]")
		}
	}
	return paths
}

// fieldDiff appends the paths under path where a and b differ: into maps
// key by key, other values (lists too) whole.
func fieldDiff(path string, a, b any, paths []string) []string {
	am, aMap := a.(map[string]any)
	bm, bMap := b.(map[string]any)
	if aMap && bMap {
		for _, k := range slices.Sorted(maps.Keys(mergeKeys(am, bm))) {
			paths = fieldDiff(path+"."+k, am[k], bm[k], paths)
		}
		return paths
	}
	if !Contains(a, b) || !Contains(b, a) {
		paths = append(paths, path)
	}
	return paths
}

// mergeKeys is the set of the keys of a and b.
func mergeKeys[V any](a, b map[string]V) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

// diffHash identifies a difference, whatever request it was found for.
func diffHash(d *bus.ShadowDiff) string {
	c := *d
	c.Request, c.Hash = "", ""
	b, _ := json.Marshal(c)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}
