package applier

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
)

func shadowReply(controller, hook, request string) *reply {
	return &reply{meta: bus.Meta{Address: bus.Address{Controller: controller, Hook: hook}, RequestID: request}, data: []byte(`{}`)}
}

// TestShadowsMatch: a sync hook's reply and its shadow's to the same
// request make a pair, whichever comes first; replies that wait longer
// than shadowMatchTimeout are dropped and counted by the side that came;
// no more than maxShadowPending wait.
func TestShadowsMatch(t *testing.T) {
	s := newShadows()
	if p, dropped := s.offer("r1", shadowReply("c", hooks.SyncShadow, "r1-shadow"), true); p != nil || dropped != "" {
		t.Fatalf("a shadow's reply alone: %+v, %q", p, dropped)
	}
	p, _ := s.offer("r1", shadowReply("c", hooks.Sync, "r1"), false)
	if p == nil || p.sync.meta.RequestID != "r1" || p.shadow.meta.RequestID != "r1-shadow" || p.controller != "c" {
		t.Fatalf("pair %+v", p)
	}
	s.offer("r2", shadowReply("c", hooks.Sync, "r2"), false)
	if p, _ := s.offer("r2", shadowReply("c", hooks.SyncShadow, "r2-shadow"), true); p == nil {
		t.Fatal("the shadow's reply after the sync hook's made no pair")
	}
	if len(s.pending) != 0 {
		t.Fatalf("%d replies still wait", len(s.pending))
	}

	s.offer("late-sync", shadowReply("c", hooks.SyncShadow, "late-sync-shadow"), true)
	s.offer("late-shadow", shadowReply("d", hooks.Sync, "late-shadow"), false)
	unmatched := map[string]int{}
	count := func(controller, reason string) { unmatched[controller+" "+reason]++ }
	s.expire(time.Now(), count)
	if len(unmatched) != 0 {
		t.Fatalf("dropped before their time: %v", unmatched)
	}
	s.expire(time.Now().Add(shadowMatchTimeout), count)
	if want := map[string]int{"c " + UnmatchedNoSyncReply: 1, "d " + UnmatchedNoShadowReply: 1}; fmt.Sprint(unmatched) != fmt.Sprint(want) || len(s.pending) != 0 {
		t.Fatalf("dropped %v, want %v; %d still wait", unmatched, want, len(s.pending))
	}

	for i := range maxShadowPending {
		s.offer(fmt.Sprint(i), shadowReply("c", hooks.Sync, fmt.Sprint(i)), false)
	}
	if _, dropped := s.offer("one more", shadowReply("c", hooks.Sync, "one more"), false); dropped != UnmatchedTooMany {
		t.Fatalf("reply %d was taken (%q)", maxShadowPending+1, dropped)
	}
}

// TestShadowDiffRecordedOnce: a parent's difference is recorded the first
// time, not again while it is the parent's last, and again once another
// came between.
func TestShadowDiffRecordedOnce(t *testing.T) {
	s := newShadows()
	a, b := &bus.ShadowDiff{Hash: "a"}, &bus.ShadowDiff{Hash: "b"}
	for i, step := range []struct {
		parent string
		d      *bus.ShadowDiff
		want   bool
	}{{"p", a, true}, {"p", a, false}, {"q", a, true}, {"p", b, true}, {"p", a, true}, {"p", a, false}} {
		if got := s.firstRecord(types.UID(step.parent), step.d); got != step.want {
			t.Errorf("step %d: %s's difference %s recorded: %t, want %t", i, step.parent, step.d.Hash, got, step.want)
		}
	}
}
