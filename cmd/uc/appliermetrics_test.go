package main

import (
	"testing"
	"time"

	"universalcontroller.dev/uc/applier"
	"universalcontroller.dev/uc/schemas/bus"
)

// TestApplierMetrics counts an applied, a rejected and a failed apply,
// times the applied one from its observation 3s before, and reports what
// a replica holds.
func TestApplierMetrics(t *testing.T) {
	m := newMetrics()
	meta := bus.Meta{Address: bus.Address{Controller: "foo.example.com", Hook: "sync"}, Observation: 7, Observed: time.Now().Add(-3 * time.Second)}
	m.applies.Applied(meta)
	m.applies.Rejected(meta, "InvalidHookReply")
	m.applies.Failed(meta)
	m.reg.MustRegister(applierCollector{heldState{
		parents:  map[int]int{0: 0, 7: 12},
		rollouts: map[string]applier.Rollouts{"foo.example.com": {Parents: 2, Latest: 3, Older: 5}},
	}})
	expectMetrics(t, scrape(t, m),
		`uc_applies_total{controller="foo.example.com",hook="sync",result="applied"} 1`,
		`uc_applies_total{controller="foo.example.com",hook="sync",result="rejected"} 1`,
		`uc_applies_total{controller="foo.example.com",hook="sync",result="failed"} 1`,
		`uc_replies_rejected_total{controller="foo.example.com",hook="sync",reason="InvalidHookReply"} 1`,
		`uc_observation_to_applied_seconds_bucket{controller="foo.example.com",hook="sync",le="2.56"} 0`,
		`uc_observation_to_applied_seconds_bucket{controller="foo.example.com",hook="sync",le="5.12"} 1`,
		`uc_applier_partition_parents{partition="0"} 0`,
		`uc_applier_partition_parents{partition="7"} 12`,
		`uc_rollout_parents{controller="foo.example.com"} 2`,
		`uc_rollout_children{controller="foo.example.com",revision="latest"} 3`,
		`uc_rollout_children{controller="foo.example.com",revision="older"} 5`,
	)
}

type heldState struct {
	parents  map[int]int
	rollouts map[string]applier.Rollouts
}

func (h heldState) PartitionParents() map[int]int         { return h.parents }
func (h heldState) Rollouts() map[string]applier.Rollouts { return h.rollouts }

// TestShadowMetrics counts a comparison that found the same, one that
// found differences of three kinds, a shadow's failure and a reply
// dropped unmatched.
func TestShadowMetrics(t *testing.T) {
	m := newMetrics()
	m.shadows.Compared("foo", &bus.ShadowDiff{})
	m.shadows.Compared("foo", &bus.ShadowDiff{Added: []string{"a"}, Changed: []bus.ChildDiff{{Child: "b"}}, ShadowRejected: &bus.Rejected{}})
	m.shadows.ShadowFailed("foo", "Timeout")
	m.shadows.Unmatched("foo", applier.UnmatchedNoSyncReply)
	expectMetrics(t, scrape(t, m),
		`uc_shadow_replies_total{controller="foo",outcome="same",reason=""} 1`,
		`uc_shadow_replies_total{controller="foo",outcome="different",reason=""} 1`,
		`uc_shadow_replies_total{controller="foo",outcome="failed",reason="Timeout"} 1`,
		`uc_shadow_replies_total{controller="foo",outcome="unmatched",reason="no-sync-reply"} 1`,
		`uc_shadow_diffs_total{controller="foo",kind="added"} 1`,
		`uc_shadow_diffs_total{controller="foo",kind="changed"} 1`,
		`uc_shadow_diffs_total{controller="foo",kind="rejected"} 1`,
	)
}
