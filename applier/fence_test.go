package applier

import (
	"context"
	"errors"
	"testing"
	"time"

	"universalcontroller.dev/uc/internal/bustest"
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

// TestGate: an apply's gate is open while the partition's key was renewed
// less than staleAfter ago — judged by the clock when the write is made,
// not by a timer that a paused process has not run yet — and closed once
// the hold ended.
func TestGate(t *testing.T) {
	renewed := time.Now()
	p := &partition{renewed: renewed}
	p.hold, p.lapse = context.WithCancelCause(context.Background())
	for _, tc := range []struct {
		name  string
		after time.Duration
		open  bool
	}{
		{"just renewed", 0, true},
		{"before staleAfter", staleAfter - time.Millisecond, true},
		{"paused past staleAfter", staleAfter, false},
		{"paused past the lease", leaseTTL + time.Minute, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := mayWrite(withGate(t.Context(), p.heldFor(func() time.Time { return renewed.Add(tc.after) })))
			if (err == nil) != tc.open {
				t.Errorf("mayWrite: %v, want open %t", err, tc.open)
			}
			if err != nil && !errors.Is(err, errHoldLost) {
				t.Errorf("mayWrite: %v, want errHoldLost", err)
			}
		})
	}
	p.lapse(errHoldLost)
	if err := mayWrite(withGate(t.Context(), p.heldFor(func() time.Time { return renewed }))); !errors.Is(err, errHoldLost) {
		t.Errorf("after the hold ended: %v, want errHoldLost", err)
	}
	if err := mayWrite(t.Context()); err != nil {
		t.Errorf("without a gate: %v", err)
	}
}
