package verdict

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

// TestOf: the verdict is read through any wrapping, an outer mark
// overrides an inner one, and an error without a mark is retried.
func TestOf(t *testing.T) {
	behind := Wait.Mark(errors.New("the cache is behind"))
	refused := Permanent.Mark(errors.New("invalid"))
	for _, tt := range []struct {
		name string
		err  error
		want Verdict
	}{
		{"nil", nil, Retry},
		{"unmarked", errors.New("boom"), Retry},
		{"a context's error", context.DeadlineExceeded, Retry},
		{"wait", behind, Wait},
		{"permanent", refused, Permanent},
		{"retry, marked", Retry.Mark(errors.New("boom")), Retry},
		{"a wrapped sentinel", fmt.Errorf("sync p: %w: generation 2, 3 last", behind), Wait},
		{"wrapped twice", fmt.Errorf("apply: %w", fmt.Errorf("create c: %w", refused)), Permanent},
		{"joined, first found", fmt.Errorf("%w (%w)", errors.New("canceled"), behind), Wait},
		{"outer mark overrides", Retry.Mark(fmt.Errorf("wrapped: %w", refused)), Retry},
		{"outer wait over permanent", Wait.Mark(refused), Wait},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := Of(tt.err); got != tt.want {
				t.Errorf("Of(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

// TestMark: a mark keeps the error's message and identity (errors.Is), and
// marks nothing when there is no error.
func TestMark(t *testing.T) {
	for _, v := range []Verdict{Retry, Wait, Permanent} {
		t.Run(v.String(), func(t *testing.T) {
			if err := v.Mark(nil); err != nil {
				t.Errorf("Mark(nil) = %v", err)
			}
			cause := errors.New("the cause")
			err := v.Mark(cause)
			if err.Error() != "the cause" {
				t.Errorf("message %q, want the cause's", err.Error())
			}
			if !errors.Is(err, cause) || !errors.Is(fmt.Errorf("x: %w", err), err) {
				t.Errorf("errors.Is does not find the marked error")
			}
		})
	}
}
