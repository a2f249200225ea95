package core

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"

	"universalcontroller.dev/uc/internal/revision"
	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

func TestPlanRollout(t *testing.T) {
	parent := testParent()
	ctl := testController(v1alpha1.ChildUpdateRollingRecreate)
	isTrue := "True"
	ctl.Children[0].StatusChecks = []v1alpha1.StatusConditionCheck{{Type: "Ready", Status: &isTrue}}

	tests := []struct {
		name    string
		revs    []*revision.Revision
		replies map[string]*hooks.SyncResponse
		live    fakeLive
		// want: the desired children as name=version, the revisions as
		// hash:names after the step ("-" for a deleted one), the reason.
		children  []string
		revisions []string
		keep      []string
		reason    string
		latest    string // h2 unless set
	}{{
		name:      "first sync puts every child on a new revision",
		replies:   map[string]*hooks.SyncResponse{"h2": wants("c=2", "b=2", "a=2")},
		children:  []string{"a=2", "b=2", "c=2"},
		revisions: []string{"h2:a,b,c"},
		reason:    v1alpha1.ReasonOnLatestRevision,
	}, {
		name:      "a new revision moves the first child in the reply's order",
		revs:      []*revision.Revision{rev("h1", 1, "a", "b", "c")},
		replies:   map[string]*hooks.SyncResponse{"h2": wants("c=2", "b=2", "a=2"), "h1": wants("c=1", "b=1", "a=1")},
		live:      fakeLive{ready("a", "1", true), ready("b", "1", true), ready("c", "1", true)},
		children:  []string{"a=1", "b=1", "c=2"},
		revisions: []string{"h1:a,b", "h2:c"},
		reason:    v1alpha1.ReasonRolloutProgressing,
	}, {
		name:      "the next child waits for the moved one to be ready",
		revs:      []*revision.Revision{rev("h1", 1, "a", "b"), rev("h2", 2, "c")},
		replies:   map[string]*hooks.SyncResponse{"h2": wants("c=2", "b=2", "a=2"), "h1": wants("c=1", "b=1", "a=1")},
		live:      fakeLive{ready("a", "1", true), ready("b", "1", true), ready("c", "2", false)},
		children:  []string{"a=1", "b=1", "c=2"},
		revisions: []string{"h1:a,b", "h2:c"},
		reason:    v1alpha1.ReasonRolloutWaiting,
	}, {
		name:      "a deleted child not moved yet comes back at its old revision",
		revs:      []*revision.Revision{rev("h1", 1, "a", "b"), rev("h2", 2, "c")},
		replies:   map[string]*hooks.SyncResponse{"h2": wants("c=2", "b=2", "a=2"), "h1": wants("c=1", "b=1", "a=1")},
		live:      fakeLive{ready("b", "1", true), ready("c", "2", false)},
		children:  []string{"a=1", "b=1", "c=2"},
		revisions: []string{"h1:a,b", "h2:c"},
		reason:    v1alpha1.ReasonRolloutWaiting,
	}, {
		name:      "the last move deletes the unused revision",
		revs:      []*revision.Revision{rev("h1", 1, "a"), rev("h2", 2, "b", "c")},
		replies:   map[string]*hooks.SyncResponse{"h2": wants("c=2", "b=2", "a=2"), "h1": wants("c=1", "b=1", "a=1")},
		live:      fakeLive{ready("a", "1", true), ready("b", "2", true), ready("c", "2", true)},
		children:  []string{"a=2", "b=2", "c=2"},
		revisions: []string{"h1:-", "h2:a,b,c"},
		reason:    v1alpha1.ReasonRolloutProgressing,
	}, {
		name:      "a child only its old revision wants is deleted by its move",
		revs:      []*revision.Revision{rev("h1", 1, "b"), rev("h2", 2, "a")},
		replies:   map[string]*hooks.SyncResponse{"h2": wants("a=2"), "h1": wants("a=1", "b=1")},
		live:      fakeLive{ready("a", "2", true), ready("b", "1", true)},
		children:  []string{"a=2"},
		revisions: []string{"h1:-", "h2:a"},
		reason:    v1alpha1.ReasonRolloutProgressing,
	}, {
		name:      "children of a revision without a reply are kept as they are",
		revs:      []*revision.Revision{rev("h1", 1, "a"), rev("h2", 2, "b")},
		replies:   map[string]*hooks.SyncResponse{"h2": wants("b=2", "a=2")},
		live:      fakeLive{ready("a", "1", true), ready("b", "2", false)},
		children:  []string{"b=2"},
		revisions: []string{"h1:a", "h2:b"},
		keep:      []string{"a"},
		reason:    v1alpha1.ReasonRolloutWaiting,
	}, {
		name:      "a child on the latest revision not updated yet holds the rollout",
		revs:      []*revision.Revision{rev("h1", 1, "a"), rev("h2", 2, "b")},
		replies:   map[string]*hooks.SyncResponse{"h2": wants("b=2", "a=2"), "h1": wants("b=1", "a=1")},
		live:      fakeLive{ready("a", "1", true), ready("b", "1", true)},
		children:  []string{"a=1", "b=2"},
		revisions: []string{"h1:a", "h2:b"},
		reason:    v1alpha1.ReasonRolloutWaiting,
	}, {
		name:      "the child that moves from a revision without a reply is updated at once",
		revs:      []*revision.Revision{rev("h1", 1, "a", "b"), rev("h2", 2, "c")},
		replies:   map[string]*hooks.SyncResponse{"h2": wants("c=2", "b=2", "a=2")},
		live:      fakeLive{ready("a", "1", true), ready("b", "1", true), ready("c", "2", true)},
		children:  []string{"b=2", "c=2"},
		revisions: []string{"h1:a", "h2:b,c"},
		keep:      []string{"a"},
		reason:    v1alpha1.ReasonRolloutProgressing,
	}, {
		name:      "going back to an older revision makes it the newest",
		latest:    "h1",
		revs:      []*revision.Revision{rev("h1", 1), rev("h2", 2, "a", "b")},
		replies:   map[string]*hooks.SyncResponse{"h1": wants("a=1", "b=1"), "h2": wants("a=2", "b=2")},
		live:      fakeLive{ready("a", "2", true), ready("b", "2", true)},
		children:  []string{"a=1", "b=2"},
		revisions: []string{"h2:b", "h1:a"},
		reason:    v1alpha1.ReasonRolloutProgressing,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			latest := "h2"
			if tt.latest != "" {
				latest = tt.latest
			}
			ro, err := PlanRollout(ctl, parent, map[string]any{"spec": map[string]any{}}, latest, tt.revs, tt.replies, tt.live)
			if err != nil {
				t.Fatal(err)
			}
			var children []string
			for _, c := range ro.Children {
				children = append(children, fmt.Sprintf("%s=%v", c.GetName(), c.Object["data"].(map[string]any)["v"]))
			}
			slices.Sort(children)
			if !slices.Equal(children, tt.children) {
				t.Errorf("children %v, want %v", children, tt.children)
			}
			unused := ro.Unused()
			var revs []string
			for _, r := range ro.Revisions {
				names := "-"
				if !slices.Contains(unused, r) {
					names = ""
					for _, c := range r.Children {
						names += strings.Join(c.Names, ",")
					}
				}
				revs = append(revs, r.Hash+":"+names)
			}
			if !slices.Equal(revs, tt.revisions) {
				t.Errorf("revisions %v, want %v", revs, tt.revisions)
			}
			var keep []string
			for id := range ro.keep {
				keep = append(keep, id.name)
			}
			if !slices.Equal(keep, tt.keep) {
				t.Errorf("kept %v, want %v", keep, tt.keep)
			}
			if ro.reason != tt.reason {
				t.Errorf("reason %s (%s), want %s", ro.reason, ro.message, tt.reason)
			}
		})
	}
}

// TestRevisionLabels: a ControllerRevision's labels for people are left out
// where their value cannot be a label's, so its create is never refused for
// them: a controller served from Metacontroller's API, a long parent name.
func TestRevisionLabels(t *testing.T) {
	parent := &unstructured.Unstructured{Object: map[string]any{}}
	parent.SetUID("uid")
	for _, tc := range []struct{ controller, parent, wantController, wantParent string }{
		{"catset", "web", "catset", "web"},
		{"cc=catset", "web", "cc.catset", "web"},
		{"catset", strings.Repeat("p", 64), "catset", ""},
	} {
		parent.SetName(tc.parent)
		got := revisionLabels(&Controller{Name: tc.controller}, parent, "h")
		if got[v1alpha1.LabelRevisionController] != tc.wantController || got[v1alpha1.LabelRevisionParentName] != tc.wantParent {
			t.Errorf("%s, %s: labels %v", tc.controller, tc.parent, got)
		}
		for k, v := range got {
			if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
				t.Errorf("label %s=%q: %v", k, v, errs)
			}
		}
	}
}
