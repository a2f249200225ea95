package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"universalcontroller.dev/uc/examples/fanout"
	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/sdk/go/hook"
)

// countingHook serves the Fanout hook, counting its calls and remembering
// when it last served each parent.
type countingHook struct {
	calls  atomic.Int64
	mu     sync.Mutex
	last   map[string]time.Time // by parent namespace/name
	counts map[string]int64     // calls by parent namespace/name
}

func newCountingHook() *countingHook {
	return &countingHook{last: map[string]time.Time{}, counts: map[string]int64{}}
}

func (h *countingHook) Hook() string { return hooks.Sync }

func (h *countingHook) Handle(ctx context.Context, data []byte) (any, error) {
	var req hook.SyncRequest
	if err := json.Unmarshal(data, &req); err != nil {
		return nil, fmt.Errorf("decode request: %w", err)
	}
	h.record(req.Parent.GetNamespace() + "/" + req.Parent.GetName())
	return fanout.Sync(ctx, &req)
}

// record counts a call for a parent (namespace/name): one this hook served,
// or one a hook process announced.
func (h *countingHook) record(parent string) {
	h.calls.Add(1)
	h.mu.Lock()
	h.last[parent] = time.Now()
	h.counts[parent]++
	h.mu.Unlock()
}

// perParent returns the calls so far by parent.
func (h *countingHook) perParent() map[string]int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return maps.Clone(h.counts)
}

// calledSince counts the parents of ns, of those named, that the hook
// served at t or later.
func (h *countingHook) calledSince(t time.Time, ns string, parents []string) int {
	return len(parents) - len(h.notCalledSince(t, ns, parents))
}

// notCalledSince lists the parents of ns, of those named, that the hook has
// not served since t.
func (h *countingHook) notCalledSince(t time.Time, ns string, parents []string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var late []string
	for _, p := range parents {
		if h.last[ns+"/"+p].Before(t) {
			late = append(late, p)
		}
	}
	return late
}

// workers serve the hook of some controllers in this process, on uc's bus.
type workers struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func serveHook(ctx context.Context, u *ucProcess, h hook.Handler, controllers ...string) *workers {
	ctx, cancel := context.WithCancel(ctx)
	w := &workers{cancel: cancel}
	quiet := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	for _, c := range controllers {
		w.wg.Go(func() {
			err := hook.Serve(ctx, u.js, c, h, hook.WithLogger(quiet))
			if err != nil && !errors.Is(err, context.Canceled) {
				logf("hook worker of %s: %v", c, err)
			}
		})
	}
	return w
}

func (w *workers) stop() {
	w.cancel()
	w.wg.Wait()
}

// exited is nil: workers in this process end with it.
func (w *workers) exited() error { return nil }
