package workloop

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/workqueue"

	"universalcontroller.dev/uc/internal/recovery"
	"universalcontroller.dev/uc/internal/verdict"
)

// errBehind is a sentinel marked once, as the watcher's are.
var errBehind = verdict.Wait.Mark(errors.New("the cache is behind"))

// TestNext: an item that syncs is forgotten, one that fails or panics is
// handed to Failed and requeued with backoff, a panic is counted and logged
// with the item, and every sync runs under the loop's deadline. The
// verdict on the error decides: one that waits is requeued with backoff but
// is no failure (logged at debug level, Failed not told); a permanent one
// is a failure that is not retried.
func TestNext(t *testing.T) {
	tests := []struct {
		name     string
		sync     func(ctx context.Context) error
		noFailed bool // the loop has no Failed: it logs failures itself
		failed   bool
		panicked bool
		requeued int
		// errorsLogged is the number of errors the loop logs: a panic,
		// and a failure when the loop has no Failed.
		errorsLogged int
		logSays      []string
	}{
		{name: "synced", sync: func(context.Context) error { return nil }},
		{name: "failed", sync: func(context.Context) error { return errors.New("boom") }, failed: true, requeued: 1},
		{name: "panicked", sync: func(context.Context) error { panic("bug") }, failed: true, panicked: true, requeued: 1, errorsLogged: 1,
			logSays: []string{"recovered from a panic", "item=key", "stack=", "panic=bug"}},
		{name: "past the deadline", sync: func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }, failed: true, requeued: 1},
		{name: "retry, marked", sync: func(context.Context) error { return verdict.Retry.Mark(errors.New("boom")) }, failed: true, requeued: 1},
		{name: "retry, logged", sync: func(context.Context) error { return errors.New("boom") }, noFailed: true, requeued: 1, errorsLogged: 1,
			logSays: []string{"level=ERROR", `msg="failed; will retry"`, "item=key", "failures=1", "err=boom"}},
		{name: "wait", sync: func(context.Context) error { return fmt.Errorf("sync: %w", errBehind) }, requeued: 1,
			logSays: []string{"level=DEBUG", `msg="waits; will retry"`, "item=key", "waits=1", `err="sync: the cache is behind"`}},
		{name: "wait, no Failed", sync: func(context.Context) error { return errBehind }, noFailed: true, requeued: 1,
			logSays: []string{"level=DEBUG", `msg="waits; will retry"`}},
		{name: "permanent", sync: func(context.Context) error { return verdict.Permanent.Mark(errors.New("invalid")) }, failed: true},
		{name: "permanent, logged", sync: func(context.Context) error { return fmt.Errorf("x: %w", verdict.Permanent.Mark(errors.New("invalid"))) },
			noFailed: true, errorsLogged: 1, logSays: []string{"level=ERROR", `msg="failed; not retried"`, "item=key", `err="x: invalid"`}},
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
				Log:     slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
				LogArgs: func(item string) []any { return []any{"item", item} },
			}
			if !tt.noFailed {
				loop.Failed = func(_ string, err error) { failures = append(failures, err) }
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
			// AddRateLimited's 1ms delay over, the item is back.
			if err := wait.PollUntilContextTimeout(t.Context(), time.Millisecond, time.Second, true, func(context.Context) (bool, error) {
				return queue.Len() == tt.requeued, nil
			}); err != nil {
				t.Errorf("%d items in the queue, want %d", queue.Len(), tt.requeued)
			}
			if got := strings.Count(logs.String(), "level=ERROR"); got != tt.errorsLogged {
				t.Errorf("logged %d errors, want %d:\n%s", got, tt.errorsLogged, logs.String())
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

// TestStartWaitsForTheItemsInHand: the wait Start returns ends only once
// the item a worker handles is done, though the queue shut down before.
func TestStartWaitsForTheItemsInHand(t *testing.T) {
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[int]())
	started, release := make(chan struct{}), make(chan struct{})
	wait := Loop[int]{Timeout: time.Minute, Log: slog.New(slog.DiscardHandler), LogArgs: func(int) []any { return nil }, Sync: func(context.Context, int) error {
		close(started)
		<-release
		return nil
	}}.Start(t.Context(), queue, 2)
	queue.Add(1)
	<-started
	queue.ShutDown()
	waited := make(chan struct{})
	go func() {
		wait()
		close(waited)
	}()
	select {
	case <-waited:
		t.Fatal("the wait ended while a worker still handled an item")
	case <-time.After(100 * time.Millisecond): // the wait had its chance to end early
	}
	close(release)
	<-waited
}
