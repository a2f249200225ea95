// Package workloop runs uc's worker loops: the registry registering
// controllers, the watcher syncing parents and the applier applying their
// replies each take keys from a client-go rate-limited workqueue and handle
// one at a time per worker, as Kubernetes' sample-controller does. This
// package is that loop, written once: it bounds each item's handling with
// a deadline, recovers a panic as the item's error (recovery.Recover),
// reads the verdict on an item's error (internal/verdict) — requeued with
// the queue's backoff (Retry, Wait) or given up (Permanent) — and forgets
// the failures of one that succeeded.
package workloop

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"

	"universalcontroller.dev/uc/internal/recovery"
	"universalcontroller.dev/uc/internal/verdict"
)

// Loop is how a queue's items are handled.
type Loop[T comparable] struct {
	// Component counts the loop's panics in recovery.Panics and names the
	// loop in its logs (recovery.Watcher, recovery.Applier, …).
	Component string
	// Timeout bounds the handling of one item: a hung call fails the item,
	// which is retried, instead of taking a worker forever.
	Timeout time.Duration
	// Sync handles one item; it must be idempotent. An error (a panic
	// included) requeues the item with the queue's backoff, unless its
	// verdict is Permanent.
	Sync func(ctx context.Context, item T) error
	// Failed, if set, is told of each failure — an error whose verdict is
	// Retry or Permanent — before the item is requeued or given up (to log
	// it with what the loop knows of the item); Log logs it otherwise. An
	// error whose verdict is Wait is no failure: Log logs it at debug level.
	Failed func(item T, err error)
	// Log logs panics, waits and, without Failed, failures.
	Log *slog.Logger
	// LogArgs are the slog key-value pairs that name an item in logs.
	LogArgs func(item T) []any
}

// Run runs workers goroutines over queue, each handling one item at a time,
// until queue shuts down; it returns at once.
func (l Loop[T]) Run(ctx context.Context, queue workqueue.TypedRateLimitingInterface[T], workers int) {
	l.Start(ctx, queue, workers)
}

// Start is Run, and returns a function that waits until the workers have
// ended: once queue shuts down, each ends when the item it handles is done.
func (l Loop[T]) Start(ctx context.Context, queue workqueue.TypedRateLimitingInterface[T], workers int) (wait func()) {
	var running sync.WaitGroup
	for range workers {
		running.Go(func() {
			for l.Next(ctx, queue) {
			}
		})
	}
	return running.Wait
}

// Next handles the queue's next item, waiting for one; it returns false
// once the queue shuts down.
func (l Loop[T]) Next(ctx context.Context, queue workqueue.TypedRateLimitingInterface[T]) bool {
	item, quit := queue.Get()
	if quit {
		return false
	}
	defer queue.Done(item)
	err := l.handle(ctx, item)
	if err == nil {
		queue.Forget(item)
		return true
	}
	v := verdict.Of(err)
	switch {
	case v == verdict.Wait:
		l.Log.Debug("waits; will retry", append(l.LogArgs(item), "component", l.Component, "waits", queue.NumRequeues(item)+1, "err", err)...)
	case l.Failed != nil:
		l.Failed(item, err)
	case v == verdict.Permanent:
		l.Log.Error("failed; not retried", append(l.LogArgs(item), "component", l.Component, "err", err)...)
	default:
		l.Log.Error("failed; will retry", append(l.LogArgs(item), "component", l.Component, "failures", queue.NumRequeues(item)+1, "err", err)...)
	}
	if v == verdict.Permanent {
		queue.Forget(item)
	} else {
		queue.AddRateLimited(item)
	}
	return true
}

// handle syncs one item within the loop's Timeout; a panic is its error.
func (l Loop[T]) handle(ctx context.Context, item T) (err error) {
	defer recovery.Recover(&err, l.Component, l.Log, l.LogArgs(item)...)
	ctx, cancel := context.WithTimeout(ctx, l.Timeout)
	defer cancel()
	return l.Sync(ctx, item)
}
