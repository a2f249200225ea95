package core

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"universalcontroller.dev/uc/internal/revision"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// mcRevision is a ControllerRevision as Metacontroller writes it for parent
// "p": created at minute created, spec.v = version in its parentPatch, the
// named ConfigMaps on it.
func mcRevision(name string, created int, version string, children ...string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion":  "metacontroller.k8s.io/v1alpha1",
		"kind":        "ControllerRevision",
		"parentPatch": map[string]any{"spec": map[string]any{"v": version}},
	}}
	if len(children) > 0 {
		names := make([]any, len(children))
		for i, c := range children {
			names[i] = c
		}
		u.Object["children"] = []any{map[string]any{"apiGroup": "", "kind": "ConfigMap", "names": names}}
	}
	u.SetName(name)
	u.SetNamespace("ns")
	u.SetUID(types.UID("mc-" + name))
	u.SetCreationTimestamp(metav1.NewTime(time.Date(2025, 1, 1, 0, created, 0, 0, time.UTC)))
	return u
}

// withSecrets adds the named Secrets to a revision's children.
func withSecrets(u *unstructured.Unstructured, names ...any) *unstructured.Unstructured {
	children, _, _ := unstructured.NestedSlice(u.Object, "children")
	u.Object["children"] = append(children, map[string]any{"apiGroup": "", "kind": "Secret", "names": names})
	return u
}

// hashOf is uc's hash of the parentPatch spec.v = version.
func hashOf(t *testing.T, version string) string {
	t.Helper()
	h, err := revision.Hash(map[string]any{"spec": map[string]any{"v": version}})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestImportRevisions: Metacontroller's revisions of a parent become uc's,
// with the same parentPatch and children, in the order Metacontroller made
// them; uc's own revisions of the parent give way to them.
func TestImportRevisions(t *testing.T) {
	parent := testParent()
	ctl := testController(v1alpha1.ChildUpdateRollingRecreate)
	ours := func(t *testing.T, version string, n int64, children ...string) *revision.Revision {
		r := rev(hashOf(t, version), n, children...)
		r.UID = types.UID("uc-" + r.Hash)
		return r
	}

	tests := []struct {
		name string
		revs func(t *testing.T) []*revision.Revision
		mc   []*unstructured.Unstructured
		// want: the revisions as version:number:names, "+" ending one not
		// created yet; the names of the revisions to save, by version.
		want  []string
		saved []string
	}{{
		name: "without Metacontroller's revisions uc's stay as they are",
		revs: func(t *testing.T) []*revision.Revision { return []*revision.Revision{ours(t, "1", 4, "a")} },
		want: []string{"1:4:a"},
	}, {
		name:  "a rollout half-way: the older revision first, whatever the names",
		mc:    []*unstructured.Unstructured{mcRevision("z-latest", 2, "2", "a"), mcRevision("a-older", 1, "1", "b", "c")},
		want:  []string{"1:1:b,c+", "2:2:a+"},
		saved: []string{"1", "2"},
	}, {
		name:  "a revision without children is left out",
		mc:    []*unstructured.Unstructured{mcRevision("latest", 2, "2"), mcRevision("older", 1, "1", "a", "b")},
		want:  []string{"1:1:a,b+"},
		saved: []string{"1"},
	}, {
		name: "uc's revision of the same parentPatch takes Metacontroller's children",
		revs: func(t *testing.T) []*revision.Revision {
			// Saved by a step before a crash left Metacontroller's there.
			return []*revision.Revision{ours(t, "1", 1, "c"), ours(t, "2", 2, "a", "b")}
		},
		mc:    []*unstructured.Unstructured{mcRevision("latest", 2, "2", "a"), mcRevision("older", 1, "1", "b", "c")},
		want:  []string{"1:1:b,c", "2:2:a"},
		saved: []string{"1", "2"},
	}, {
		name: "uc's revision of another parentPatch loses its children",
		revs: func(t *testing.T) []*revision.Revision { return []*revision.Revision{ours(t, "0", 7, "a", "b")} },
		mc:   []*unstructured.Unstructured{mcRevision("latest", 2, "2", "a"), mcRevision("older", 1, "1", "b")},
		want: []string{"1:1:b+", "2:2:a+", "0:0:"},
		// uc's is saved (or deleted as unused) without its children.
		saved: []string{"1", "2", "0"},
	}, {
		name:  "children of a kind that does not roll out are left out",
		mc:    []*unstructured.Unstructured{withSecrets(mcRevision("older", 1, "1", "a"), "s")},
		want:  []string{"1:1:a+"},
		saved: []string{"1"},
	}, {
		name:  "two revisions of one parentPatch are one",
		mc:    []*unstructured.Unstructured{mcRevision("x", 1, "1", "a"), mcRevision("y", 2, "1", "b")},
		want:  []string{"1:1:a,b+"},
		saved: []string{"1"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var revs []*revision.Revision
			if tt.revs != nil {
				revs = tt.revs(t)
			}
			out, saved, err := ImportRevisions(ctl, parent, revs, tt.mc)
			if err != nil {
				t.Fatal(err)
			}
			version := map[string]string{}
			for _, v := range []string{"0", "1", "2"} {
				version[revision.Name("p", hashOf(t, v))] = v
			}
			var got []string
			for _, r := range out {
				var names []string
				for _, c := range r.Children {
					names = append(names, c.Names...)
				}
				s := fmt.Sprintf("%s:%d:%s", version[r.Name], r.Revision, strings.Join(names, ","))
				if r.UID == "" {
					s += "+"
					if ref := metav1.GetControllerOf(r); ref == nil || ref.UID != parent.GetUID() || r.Labels[revision.LabelHash] != r.Hash {
						t.Errorf("new revision %s: owner %v, labels %v", r.Name, ref, r.Labels)
					}
				}
				got = append(got, s)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("revisions %v, want %v", got, tt.want)
			}
			var savedVersions []string
			for _, name := range saved {
				savedVersions = append(savedVersions, version[name])
			}
			if !slices.Equal(savedVersions, tt.saved) {
				t.Errorf("saved %v, want %v", savedVersions, tt.saved)
			}
		})
	}
}
