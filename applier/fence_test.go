package applier

import (
	"errors"
	"testing"
	"time"

	"universalcontroller.dev/uc/internal/bustest"
	"universalcontroller.dev/uc/internal/shares"
	"universalcontroller.dev/uc/internal/topology"
	"universalcontroller.dev/uc/schemas/bus"
)

// TestFenceAdvancesByCompareAndSet: two replicas advance one parent's
// fence, each from what it last knew of it. The one that knew an older
// fence — a replica that was paused while the other applied a newer
// observation — cannot move it back, and learns errFenceMoved; one whose
// observation is still newer moves it from the fence it reads again.
func TestFenceAdvancesByCompareAndSet(t *testing.T) {
	js := bustest.JetStream(t)
	ctx := t.Context()
	f, err := newKVFence(ctx, js, 1)
	if err != nil {
		t.Fatal(err)
	}
	const uid = "parent"
	at := func(obs int64) bus.Fence { return bus.Fence{Observation: obs, Request: "r"} }
	first, err := f.advance(ctx, uid, at(10), fenceEntry{})
	if err != nil {
		t.Fatalf("the first fence: %v", err)
	}
	if _, err := f.advance(ctx, uid, at(11), fenceEntry{}); err != nil {
		t.Fatalf("a fence created meanwhile is read again and moved from: %v", err)
	}
	paused := first // what a paused replica knows
	newer, err := f.advance(ctx, uid, at(30), paused)
	if err != nil {
		t.Fatalf("advance past a fence moved by another replica to an older observation: %v", err)
	}
	if _, err := f.advance(ctx, uid, at(20), paused); !errors.Is(err, errFenceMoved) {
		t.Fatalf("a stale replica's advance to an older observation: %v, want errFenceMoved", err)
	}
	cur, err := f.last(ctx, uid)
	if err != nil {
		t.Fatal(err)
	}
	if cur != newer {
		t.Errorf("fence %+v after the stale advance, want %+v", cur, newer)
	}
}

// TestGate: an apply's writes pass its gate, the check of its hold: open
// while the partition's key was renewed less than staleAfter ago, closed
// after, saying until when the apply could write; an apply without a gate
// may write. (internal/shares tests the check itself.)
func TestGate(t *testing.T) {
	held := shares.NewHold(time.Now())
	if err := mayWrite(withGate(t.Context(), held.Check)); err != nil {
		t.Errorf("a hold just renewed: %v", err)
	}
	renewed := time.Now().Add(-topology.LeaseTTL)
	ctx := withGate(t.Context(), shares.NewHold(renewed).Check)
	if err := mayWrite(ctx); !errors.Is(err, shares.ErrHoldLost) {
		t.Errorf("a hold renewed %s ago: %v, want ErrHoldLost", topology.LeaseTTL, err)
	}
	if until, closed := writableUntil(ctx); !closed || !until.After(renewed) || !until.Before(time.Now()) {
		t.Errorf("writable until %v (closed: %v), want between the renewal and now", until, closed)
	}
	if err := mayWrite(t.Context()); err != nil {
		t.Errorf("without a gate: %v", err)
	}
}
