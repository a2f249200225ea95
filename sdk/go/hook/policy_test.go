package hook

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

func TestBackoff(t *testing.T) {
	p := Policy{BackoffDelay: time.Second, MaxBackoffDelay: 10 * time.Second}
	for _, tc := range []struct {
		delivery int
		jitter   float64
		want     time.Duration
	}{
		{1, 0, time.Second},
		{2, 0, 2 * time.Second},
		{3, 0, 4 * time.Second},
		{4, 0, 8 * time.Second},
		{5, 0, 10 * time.Second}, // capped
		{500, 0, 10 * time.Second},
		{1, 0.5, 750 * time.Millisecond},    // jitter takes up to half off
		{3, 0.999, 2002 * time.Millisecond}, // almost half of 4s
		{5, 0.5, 7500 * time.Millisecond},
	} {
		if got := p.Backoff(tc.delivery, tc.jitter); got != tc.want {
			t.Errorf("Backoff(%d, %v) = %s, want %s", tc.delivery, tc.jitter, got, tc.want)
		}
	}
}

func TestPolicyForRequest(t *testing.T) {
	def := Policy{Timeout: 10 * time.Second, MaxDeliveries: 10, BackoffDelay: time.Second, MaxBackoffDelay: time.Minute}
	for _, tc := range []struct {
		name, request string
		want          Policy
	}{
		{"no controller", `{"parent":{}}`, def},
		{"not JSON", `<html>`, def},
		{"no delivery", `{"controller":{"spec":{"hooks":{"sync":{"webhook":{"url":"http://x"}}}}}}`, def},
		{"delivery", `{"controller":{"spec":{"hooks":{"sync":{"delivery":{"timeout":"2s","maxDeliveries":3,"backoffDelay":"100ms","maxBackoffDelay":"5s"}}}}}}`,
			Policy{Timeout: 2 * time.Second, MaxDeliveries: 3, BackoffDelay: 100 * time.Millisecond, MaxBackoffDelay: 5 * time.Second}},
		{"webhook timeout wins", `{"controller":{"spec":{"hooks":{"sync":{"webhook":{"timeout":"3s"},"delivery":{"timeout":"2s"}}}}}}`,
			Policy{Timeout: 3 * time.Second, MaxDeliveries: 10, BackoffDelay: time.Second, MaxBackoffDelay: time.Minute}},
		{"other hook", `{"controller":{"spec":{"hooks":{"finalize":{"delivery":{"maxDeliveries":1}}}}}}`, def},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := def.ForRequest([]byte(tc.request), "sync"); got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestPolicyForRetry: a retry (a request with failures before it) is
// tried once; any other request as the policy says.
func TestPolicyForRetry(t *testing.T) {
	for _, tc := range []struct{ failures, want int }{{0, 10}, {1, 1}, {7, 1}} {
		if got := DefaultPolicy.ForRetry(tc.failures).MaxDeliveries; got != tc.want {
			t.Errorf("%d failures before: %d deliveries, want %d", tc.failures, got, tc.want)
		}
	}
}

func TestReasonOf(t *testing.T) {
	for _, tc := range []struct {
		err        error
		reason     string
		retryAfter time.Duration
	}{
		{errors.New("boom"), ReasonWorkerError, 0},
		{fmt.Errorf("call: %w", context.DeadlineExceeded), ReasonTimeout, 0},
		{fmt.Errorf("wrapped: %w", &Error{Reason: ReasonHTTPError, RetryAfter: 3 * time.Second, Err: errors.New("429")}), ReasonHTTPError, 3 * time.Second},
		{&Error{Reason: ReasonInvalidReply, Err: errors.New("html")}, ReasonInvalidReply, 0},
	} {
		reason, after := ReasonOf(tc.err)
		if reason != tc.reason || after != tc.retryAfter {
			t.Errorf("ReasonOf(%v) = %s, %s; want %s, %s", tc.err, reason, after, tc.reason, tc.retryAfter)
		}
	}
}
