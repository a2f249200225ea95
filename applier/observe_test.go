package applier

import (
	"maps"
	"testing"

	"universalcontroller.dev/uc/core"
	"universalcontroller.dev/uc/core/coretest"
	"universalcontroller.dev/uc/internal/objtest"
	"universalcontroller.dev/uc/internal/revision"
	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// TestRolloutProgress: after each step of a parent's rollout, its
// partition counts its children on the latest revision and on older
// ones, and forgets it once every child is on the latest; the replica
// reports them by controller, and the parents it knows per partition.
func TestRolloutProgress(t *testing.T) {
	parent := objtest.Parent()
	ctl := coretest.Controller(v1alpha1.ChildUpdateRollingRecreate)
	isTrue := "True"
	ctl.Children[0].StatusChecks = []v1alpha1.StatusConditionCheck{{Type: "Ready", Status: &isTrue}}
	parents := newKnownParents()
	parents.fenced[parent.GetUID()], parents.fenced["other"] = fenceEntry{observation: 1}, fenceEntry{observation: 1}
	a := &Applier{in: &intake{held: map[int]*partition{3: {n: 3, parents: parents}}}}
	replies := map[string]*hooks.SyncResponse{"h2": objtest.Wants("c=2", "b=2", "a=2"), "h1": objtest.Wants("c=1", "b=1", "a=1")}
	for _, step := range []struct {
		revs []*revision.Revision
		live objtest.Live
		want map[string]Rollouts
	}{{
		revs: []*revision.Revision{objtest.Rev("h1", 1, "a", "b", "c")},
		live: objtest.Live{objtest.Ready("a", "1", true), objtest.Ready("b", "1", true), objtest.Ready("c", "1", true)},
		want: map[string]Rollouts{ctl.Name: {Parents: 1, Latest: 1, Older: 2}},
	}, {
		revs: []*revision.Revision{objtest.Rev("h1", 1, "a", "b"), objtest.Rev("h2", 2, "c")},
		live: objtest.Live{objtest.Ready("a", "1", true), objtest.Ready("b", "1", true), objtest.Ready("c", "2", false)},
		want: map[string]Rollouts{ctl.Name: {Parents: 1, Latest: 1, Older: 2}}, // waiting for c
	}, {
		revs: []*revision.Revision{objtest.Rev("h1", 1, "a"), objtest.Rev("h2", 2, "b", "c")},
		live: objtest.Live{objtest.Ready("a", "1", true), objtest.Ready("b", "2", true), objtest.Ready("c", "2", true)},
		want: map[string]Rollouts{}, // a moved: done
	}} {
		ro, err := core.PlanRollout(ctl, parent, map[string]any{"spec": map[string]any{}}, "h2", step.revs, replies, step.live)
		if err != nil {
			t.Fatal(err)
		}
		parents.rolled(parent.GetUID(), ctl, ro)
		if got := a.Rollouts(); !maps.Equal(got, step.want) {
			t.Errorf("after the step from %v: rollouts %v, want %v", step.revs, got, step.want)
		}
	}
	if got, want := a.PartitionParents(), map[int]int{3: 2}; !maps.Equal(got, want) {
		t.Errorf("parents per partition %v, want %v", got, want)
	}
}
