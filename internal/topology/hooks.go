package topology

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
)

// HookConsumers keeps one hook consumer per hook of every registered
// controller: it creates them, creates again those that are lost (a NATS
// server restarted on its files has lost every consumer whose state was in
// memory), and deletes those of hooks and controllers that are gone. The
// dispatcher role runs it.
type HookConsumers struct {
	js   jetstream.JetStream
	log  *slog.Logger
	wake chan struct{}

	mu sync.Mutex
	// hooks are the hooks whose consumers to keep: true once created.
	hooks map[hookKey]bool
	// gone are hooks no longer declared: their consumers are deleted.
	gone map[hookKey]bool
}

type hookKey struct{ controller, hook string }

// NewHookConsumers makes a HookConsumers that keeps no consumer yet, and
// logs to log: tell it the controllers' hooks with Declare, and run it.
func NewHookConsumers(js jetstream.JetStream, log *slog.Logger) *HookConsumers {
	return &HookConsumers{js: js, log: log, wake: make(chan struct{}, 1),
		hooks: map[hookKey]bool{}, gone: map[hookKey]bool{}}
}

// Declare says which hooks the controller declares now: none once it is
// removed.
func (t *HookConsumers) Declare(controller string, declared []string) {
	t.mu.Lock()
	for _, hook := range hooks.All {
		key := hookKey{controller, hook}
		_, kept := t.hooks[key]
		switch {
		case !slices.Contains(declared, hook):
			delete(t.hooks, key)
			t.gone[key] = true
		case !kept:
			delete(t.gone, key)
			t.hooks[key] = false // to create
		}
	}
	t.mu.Unlock()
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// Run keeps the hook consumers until ctx ends: at once when a controller
// comes or goes, and every bus.CheckEvery.
func (t *HookConsumers) Run(ctx context.Context) error {
	tick := time.NewTicker(bus.CheckEvery)
	defer tick.Stop()
	for {
		t.keep(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		case <-t.wake:
		}
	}
}

// keep deletes the consumers of controllers that are gone, creates those of
// new ones, and creates again those that are lost. What fails is retried
// on the next round: the bus may be down, or electing a leader.
func (t *HookConsumers) keep(ctx context.Context) {
	t.mu.Lock()
	kept, gone := maps.Clone(t.hooks), maps.Clone(t.gone)
	t.mu.Unlock()
	for key := range gone {
		c := key.consumer()
		err := t.js.DeleteConsumer(ctx, c.Stream, c.Name())
		if err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			t.log.Error("delete hook consumer", "controller", key.controller, "hook", key.hook, "err", err)
			continue
		}
		t.mu.Lock()
		delete(t.gone, key)
		t.mu.Unlock()
	}
	for key, created := range kept {
		attempt, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := t.ensure(attempt, key, created)
		cancel()
		if err != nil {
			t.log.Warn("retrying", "what", "create hook consumer", "controller", key.controller, "hook", key.hook, "err", err)
			continue
		}
		t.mu.Lock()
		if _, ok := t.hooks[key]; ok {
			t.hooks[key] = true
		}
		t.mu.Unlock()
	}
}

// ensure creates a hook's consumer unless it was created and still exists.
func (t *HookConsumers) ensure(ctx context.Context, key hookKey, created bool) error {
	c := key.consumer()
	if created {
		_, err := t.js.Consumer(ctx, c.Stream, c.Name())
		if !errors.Is(err, jetstream.ErrConsumerNotFound) {
			return err
		}
		t.log.Warn("hook consumer was gone; creating it again", "controller", key.controller, "hook", key.hook)
	}
	_, err := EnsureConsumer(ctx, t.js, c)
	return err
}

// Consumers are the hook consumers of the registered controllers: they
// must exist for the dispatcher role to be ready.
func (t *HookConsumers) Consumers() []Consumer {
	t.mu.Lock()
	defer t.mu.Unlock()
	cs := make([]Consumer, 0, len(t.hooks))
	for key := range t.hooks {
		cs = append(cs, key.consumer())
	}
	slices.SortFunc(cs, func(a, b Consumer) int { return strings.Compare(a.Name(), b.Name()) })
	return cs
}

func (k hookKey) consumer() Consumer { return HookConsumer(k.controller, k.hook) }
