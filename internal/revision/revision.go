// Package revision computes the revisions of a parent whose children roll
// out: the part of the parent that takes part in a rollout (its
// revisionHistory.fieldPaths), a name derived from its hash, the parent as it
// was at an older revision, and which revision each child is on. The watcher
// uses it to call the sync hook once per live revision; the applier to record
// and advance the rollout in ControllerRevision objects.
package revision

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// LabelHash on a ControllerRevision is the hash of its parentPatch.
const LabelHash = v1alpha1.Group + "/revision-hash"

// DefaultFieldPaths take part in a rollout when revisionHistory is unset.
var DefaultFieldPaths = []string{"spec"}

// FieldPaths are the parent fields of a controller that take part in a
// rollout.
func FieldPaths(spec *v1alpha1.UniversalControllerSpec) []string {
	if rh := spec.ParentResource.RevisionHistory; rh != nil && len(rh.FieldPaths) > 0 {
		return rh.FieldPaths
	}
	return DefaultFieldPaths
}

// Patch is the part of parent under fieldPaths: the content of a revision.
func Patch(parent *unstructured.Unstructured, fieldPaths []string) map[string]any {
	patch := map[string]any{}
	for _, p := range fieldPaths {
		path := strings.Split(p, ".")
		if v, found, _ := unstructured.NestedFieldCopy(parent.Object, path...); found {
			_ = unstructured.SetNestedField(patch, v, path...)
		}
	}
	return patch
}

// Hash names a patch: equal patches have equal hashes.
func Hash(patch map[string]any) (string, error) {
	b, err := json.Marshal(patch) // maps marshal with sorted keys
	if err != nil {
		return "", fmt.Errorf("hash the revision: %w", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:5]), nil
}

// Name is the ControllerRevision name of a parent's revision.
func Name(parentName, hash string) string {
	const max = 253 - 11 // room for "-" and the hash
	if len(parentName) > max {
		parentName = parentName[:max]
	}
	return parentName + "-" + hash
}

// At returns the parent as it was at a revision: fieldPaths take their
// values from the revision's patch, every other field is as it is now.
func At(parent *unstructured.Unstructured, patch map[string]any, fieldPaths []string) *unstructured.Unstructured {
	out := parent.DeepCopy()
	for _, p := range fieldPaths {
		path := strings.Split(p, ".")
		unstructured.RemoveNestedField(out.Object, path...)
		if v, found, _ := unstructured.NestedFieldCopy(patch, path...); found {
			_ = unstructured.SetNestedField(out.Object, v, path...)
		}
	}
	return out
}

// Revision is a decoded ControllerRevision.
type Revision struct {
	*v1alpha1.ControllerRevision
	Hash string
}

// Decode reads a ControllerRevision from an informer or a list.
func Decode(u *unstructured.Unstructured) (*Revision, error) {
	var cr v1alpha1.ControllerRevision
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &cr); err != nil {
		return nil, fmt.Errorf("decode ControllerRevision %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	return &Revision{ControllerRevision: &cr, Hash: cr.Labels[LabelHash]}, nil
}

// PatchOf is the revision's parentPatch.
func (r *Revision) PatchOf() (map[string]any, error) {
	patch := map[string]any{}
	if len(r.ParentPatch.Raw) == 0 {
		return patch, nil
	}
	if err := json.Unmarshal(r.ParentPatch.Raw, &patch); err != nil {
		return nil, fmt.Errorf("ControllerRevision %s: parentPatch: %w", r.Name, err)
	}
	return patch, nil
}

// HasChildren tells a revision some child is still on from an unused one.
func (r *Revision) HasChildren() bool {
	return slices.ContainsFunc(r.Children, func(c v1alpha1.RevisionChildren) bool { return len(c.Names) > 0 })
}

// Has reports whether the named child of that group and kind is on r.
func (r *Revision) Has(group, kind, name string) bool {
	for _, c := range r.Children {
		if c.APIGroup == group && c.Kind == kind {
			return slices.Contains(c.Names, name)
		}
	}
	return false
}

// Add puts the named child on r; it reports whether r changed.
func (r *Revision) Add(group, kind, name string) bool {
	for i := range r.Children {
		c := &r.Children[i]
		if c.APIGroup == group && c.Kind == kind {
			if slices.Contains(c.Names, name) {
				return false
			}
			c.Names = append(c.Names, name)
			slices.Sort(c.Names)
			return true
		}
	}
	r.Children = append(r.Children, v1alpha1.RevisionChildren{APIGroup: group, Kind: kind, Names: []string{name}})
	return true
}

// Remove takes the named child off r; it reports whether r changed.
func (r *Revision) Remove(group, kind, name string) bool {
	for i := range r.Children {
		c := &r.Children[i]
		if c.APIGroup == group && c.Kind == kind {
			if j := slices.Index(c.Names, name); j >= 0 {
				c.Names = slices.Delete(c.Names, j, j+1)
				return true
			}
		}
	}
	return false
}

// Sort orders revisions oldest first.
func Sort(revs []*Revision) {
	slices.SortFunc(revs, func(a, b *Revision) int { return int(a.Revision - b.Revision) })
}

// Of returns the revision a child is on: the newest that names it, or nil.
func Of(revs []*Revision, group, kind, name string) *Revision {
	for i := len(revs) - 1; i >= 0; i-- {
		if revs[i].Has(group, kind, name) {
			return revs[i]
		}
	}
	return nil
}
