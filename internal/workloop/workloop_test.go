package workloop

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/client-go/util/workqueue"

	"universalcontroller.dev/uc/internal/recovery"
)

// TestNext: an item that syncs is forgotten, one that fails or panics is
// handed to Failed and requeued with backoff, a panic is counted and logged
// with the item, and every sync runs under the loop's deadline.
func TestNext(t *testing.T) {
	tests := []struct {
		name     string
		sync     func(ctx context.Context) error
		failed   bool
		panicked bool
		requeued int
		logSays  []string
	}{
		{name: "synced", sync: func(context.Context) error { return nil }},
		{name: "failed", sync: func(context.Context) error { return errors.New("boom") }, failed: true, requeued: 1},
		{name: "panicked", sync: func(context.Context) error { panic("bug") }, failed: true, panicked: true, requeued: 1,
			logSays: []string{"recovered from a panic", "item=key", "stack=", "panic=bug"}},
		{name: "past the deadline", sync: func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }, failed: true, requeued: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs bytes.Buffer
			queue := workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Millisecond, time.Millisecond))
			defer queue.ShutDown()
			var failures []error
			loop := Loop[string]{
				Component: "test",
				Timeout:   50 * time.Millisecond,
				Sync: func(ctx context.Context, item string) error {
					if _, ok := ctx.Deadline(); !ok {
						t.Error("the sync has no deadline")
					}
					return tt.sync(ctx)
				},
				Failed:  func(_ string, err error) { failures = append(failures, err) },
				Log:     slog.New(slog.NewTextHandler(&logs, nil)),
				LogArgs: func(item string) []any { return []any{"item", item} },
			}
			before := testutil.ToFloat64(recovery.Panics.WithLabelValues("test"))
			queue.Add("key")
			if !loop.Next(t.Context(), queue) {
				t.Fatal("the loop stopped")
			}
			if got := len(failures) == 1; got != tt.failed {
				t.Errorf("Failed was told of %v", failures)
			}
			if got := queue.NumRequeues("key"); got != tt.requeued {
				t.Errorf("requeued %d times, want %d", got, tt.requeued)
			}
			if got := testutil.ToFloat64(recovery.Panics.WithLabelValues("test")) - before; got != map[bool]float64{true: 1}[tt.panicked] {
				t.Errorf("counted %v panics", got)
			}
			for _, want := range tt.logSays {
				if !strings.Contains(logs.String(), want) {
					t.Errorf("the log does not say %q:\n%s", want, logs.String())
				}
			}
		})
	}
}

// TestRunHandlesEveryItem: Run's workers, taking items side by side,
// handle every item of the queue.
func TestRunHandlesEveryItem(t *testing.T) {
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[int]())
	synced := make(chan int, 10)
	Loop[int]{Component: "test", Timeout: time.Second, Log: slog.Default(), LogArgs: func(int) []any { return nil },
		Sync: func(_ context.Context, i int) error { synced <- i; return nil }}.Run(t.Context(), queue, 3)
	for i := range 10 {
		queue.Add(i)
	}
	seen := map[int]bool{}
	deadline := time.After(10 * time.Second)
	for len(seen) < 10 {
		select {
		case i := <-synced:
			seen[i] = true
		case <-deadline:
			t.Fatalf("synced %d of 10 items", len(seen))
		}
	}
	queue.ShutDownWithDrain()
}
