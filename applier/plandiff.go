package applier

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

// outcome is what one reply would make of a parent, as the comparison of a
// sync hook's reply with its shadow's sees it: the children it wants, as
// the objects uc would write, and the status and conditions it sets; or
// why it would be rejected.
type outcome struct {
	rejected *bus.Rejected
	// children are by childKey.
	children   map[string]*unstructured.Unstructured
	status     map[string]any // nil: the reply leaves the status as it is
	conditions []hooks.Condition
}

// childKey names a child in a ShadowDiff: "<Kind>.<apiVersion>
// <namespace>/<name>".
func childKey(o *unstructured.Unstructured) string {
	return hooks.GroupKey(o.GetKind(), o.GetAPIVersion()) + " " + objectKey(o)
}

// diffOutcomes is how the shadow's outcome differs from the sync hook's,
// both replies to the request of that id. A reply that would be rejected
// is compared by its rejection only.
func diffOutcomes(request string, sync, shadow outcome) *bus.ShadowDiff {
	d := &bus.ShadowDiff{Request: request}
	if sync.rejected != nil || shadow.rejected != nil {
		if !reflect.DeepEqual(sync.rejected, shadow.rejected) {
			d.SyncRejected, d.ShadowRejected = sync.rejected, shadow.rejected
		}
	} else {
		for _, key := range slices.Sorted(maps.Keys(shadow.children)) {
			if sync.children[key] == nil {
				d.Added = append(d.Added, key)
			}
		}
		for _, key := range slices.Sorted(maps.Keys(sync.children)) {
			want, shadowWants := sync.children[key], shadow.children[key]
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
func statusDiff(sync, shadow outcome) []string {
	var paths []string
	if (sync.status == nil) != (shadow.status == nil) {
		paths = append(paths, "status")
	} else {
		paths = fieldDiff("status", sync.status, shadow.status, paths)
	}
	byType := func(conds []hooks.Condition) map[string]hooks.Condition {
		out := map[string]hooks.Condition{}
		for _, c := range conds {
			out[c.Type] = c
		}
		return out
	}
	a, b := byType(sync.conditions), byType(shadow.conditions)
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
	if !contains(a, b) || !contains(b, a) {
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
