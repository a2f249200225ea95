package main

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// pollInterval is how often conditions are checked.
const pollInterval = 50 * time.Millisecond

// waitFor checks cond until it holds, failing after timeout. progress, when
// set, describes how far cond got, for the error.
func waitFor(ctx context.Context, timeout time.Duration, what string, cond func(context.Context) (bool, error), progress func() string) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	var lastErr error
	for {
		ok, err := cond(ctx)
		if ok {
			return nil
		}
		if err != nil {
			if _, fatal := err.(fatalError); fatal {
				return fmt.Errorf("%s: %w", what, err)
			}
			lastErr = err
		}
		select {
		case <-ctx.Done():
			msg := fmt.Sprintf("%s: not within %s", what, timeout)
			if progress != nil {
				msg += " (" + progress() + ")"
			}
			if lastErr != nil {
				msg += fmt.Sprintf("; last error: %v", lastErr)
			}
			return fmt.Errorf("%s", msg)
		case <-tick.C:
		}
	}
}

// fatalError ends a waitFor at once.
type fatalError struct{ error }

// parallel calls fn for 0 ≤ i < n from at most workers goroutines at once.
// It stops starting new calls after the first error, which it returns.
func parallel(ctx context.Context, n, workers int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	next := make(chan int)
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	for range min(workers, n) {
		wg.Go(func() {
			for i := range next {
				if err := fn(ctx, i); err != nil {
					once.Do(func() { first = err; cancel() })
				}
			}
		})
	}
feed:
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	return first
}
