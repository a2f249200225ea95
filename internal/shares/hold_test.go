package shares

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// TestHoldCheck: a hold's check passes while the partition's key was
// renewed less than staleAfter ago — judged by the clock when the check is
// made, not by a timer that a paused process has not run yet — and fails
// once the hold ended.
func TestHoldCheck(t *testing.T) {
	renewed := time.Now()
	h := NewHold(renewed)
	for _, tc := range []struct {
		name  string
		after time.Duration
		held  bool
	}{
		{"just renewed", 0, true},
		{"before staleAfter", staleAfter - time.Millisecond, true},
		{"paused past staleAfter", staleAfter, false},
		{"paused past the lease", leaseTTL + time.Minute, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := h.at(renewed.Add(tc.after))
			if (err == nil) != tc.held {
				t.Fatalf("check: %v, want held %t", err, tc.held)
			}
			var l *Lapsed
			if err != nil && (!errors.Is(err, ErrHoldLost) || !errors.As(err, &l) || !l.Until.Equal(renewed.Add(staleAfter))) {
				t.Errorf("check: %v, want ErrHoldLost, lapsed at the renewal + %s", err, staleAfter)
			}
		})
	}
	if err := h.Check(); err != nil {
		t.Errorf("check now: %v", err)
	}
	h.end(fmt.Errorf("%w: released", ErrHoldLost))
	if err := h.at(renewed); !errors.Is(err, ErrHoldLost) {
		t.Errorf("after the hold ended: %v, want ErrHoldLost", err)
	}
	if err := h.Err(); !errors.Is(err, ErrHoldLost) {
		t.Errorf("Err after the hold ended: %v, want ErrHoldLost", err)
	}
}
