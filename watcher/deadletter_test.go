package watcher

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// TestFirstRetry: a parent's first retry waits what the hook's delivery
// policy would have waited after its last delivery, at least a second.
func TestFirstRetry(t *testing.T) {
	deliveries := func(n int32, backoff, most time.Duration) *v1alpha1.Hook {
		d := &v1alpha1.Delivery{MaxDeliveries: &n, BackoffDelay: &metav1.Duration{Duration: backoff}}
		if most > 0 {
			d.MaxBackoffDelay = &metav1.Duration{Duration: most}
		}
		return &v1alpha1.Hook{Delivery: d}
	}
	for _, tt := range []struct {
		name string
		hook *v1alpha1.Hook
		want time.Duration
	}{
		{"no hook", nil, time.Minute},
		{"no delivery policy", &v1alpha1.Hook{}, time.Minute}, // 10 deliveries from 1s, up to 1m
		{"3 deliveries 200ms apart", deliveries(3, 200*time.Millisecond, 0), time.Second},
		{"5 deliveries from 1s", deliveries(5, time.Second, 0), 16 * time.Second},
		{"5 deliveries from 1s, up to 10s", deliveries(5, time.Second, 10*time.Second), 10 * time.Second},
		{"1 delivery", deliveries(1, 3*time.Second, 0), 3 * time.Second},
	} {
		if got := firstRetryOf(tt.hook); got != tt.want {
			t.Errorf("%s: %s, want %s", tt.name, got, tt.want)
		}
	}
}
