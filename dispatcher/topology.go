// Package dispatcher owns the bus topology — the JetStream streams, and one
// durable consumer per hook of every registered controller — and delivers
// requests to hooks that are not on the bus (Dispatcher): webhooks and
// Knative Addressables, over HTTP. The Go SDK for hooks that are on the bus
// (sdk/go, package hook) serves the dispatcher's hooks too, so both keep the
// same delivery promises.
package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"universalcontroller.dev/uc/internal/registry"
	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// TopologyOptions tune the streams.
type TopologyOptions struct {
	// Replicas of every stream: 1 on a single server, 3 on a cluster.
	Replicas int
	// Storage is jetstream.FileStorage unless set.
	Storage jetstream.StorageType
}

// EnsureStreams creates the bus streams, or updates them to this
// configuration.
func EnsureStreams(ctx context.Context, js jetstream.JetStream, opts TopologyOptions) error {
	if opts.Replicas <= 0 {
		opts.Replicas = 1
	}
	streams := []jetstream.StreamConfig{{
		Name:        bus.RequestStream,
		Description: "hook requests: the latest observed state of each parent, one message per parent and hook",
		Subjects:    []string{bus.RequestPrefix + ".>"},
		Retention:   jetstream.WorkQueuePolicy,
		// One message per subject is what coalesces: a newer observation of a
		// parent replaces the request still waiting for a hook.
		MaxMsgsPerSubject: 1,
		Discard:           jetstream.DiscardOld,
		Duplicates:        2 * time.Minute,
	}, {
		Name:        bus.ReplyStream,
		Description: "hook replies waiting for an applier",
		Subjects:    []string{bus.ReplyPrefix + ".>"},
		Retention:   jetstream.WorkQueuePolicy,
		Duplicates:  2 * time.Minute,
	}, {
		Name:        bus.DeadLetterStream,
		Description: "requests no hook could serve within their maximum deliveries",
		Subjects:    []string{bus.DeadLetterPrefix + ".>"},
		Retention:   jetstream.LimitsPolicy,
		MaxAge:      7 * 24 * time.Hour,
	}, {
		Name:        bus.PlanStream,
		Description: "the last plan of each parent of a dry-run controller",
		Subjects:    []string{bus.PlanPrefix + ".>"},
		Retention:   jetstream.LimitsPolicy,
		// The last plan per parent is all uc trace shows.
		MaxMsgsPerSubject: 1,
		Discard:           jetstream.DiscardOld,
		MaxAge:            bus.PlanMaxAge,
	}}
	for _, cfg := range streams {
		cfg.Replicas = opts.Replicas
		cfg.Storage = opts.Storage
		if _, err := js.CreateOrUpdateStream(ctx, cfg); err != nil {
			return fmt.Errorf("stream %s: %w", cfg.Name, err)
		}
	}
	return nil
}

// HookConsumerConfig is the durable consumer shared by the workers of one
// controller's hook. Its ack wait is short (bus.AckWait): the requests a
// dead worker held go to the others within seconds, and a worker keeps
// those it serves or queues with in-progress acks.
func HookConsumerConfig(controller, hook string) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:       bus.HookConsumer(controller, hook),
		Description:   fmt.Sprintf("%s hook of controller %s", hook, controller),
		FilterSubject: bus.HookRequests(controller, hook),
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       bus.AckWait,
		MaxAckPending: 1000,
		MemoryStorage: bus.ConsumerStateInMemory,
	}
}

// Topology keeps one hook consumer per hook of every registered controller:
// it creates them, creates again those that are lost (a NATS server
// restarted on its files has lost every consumer whose state was in
// memory), and deletes those of hooks and controllers that are gone.
type Topology struct {
	js   jetstream.JetStream
	log  *slog.Logger
	wake chan struct{}

	mu sync.Mutex
	// hooks are the hooks whose consumers to keep: true once created.
	hooks map[hookKey]bool
	// gone are hooks no longer declared: their consumers are deleted.
	gone map[hookKey]bool
}

// Registrations tells about controllers as they are registered, changed
// and removed; *registry.Registry does.
type Registrations interface{ Subscribe(registry.Listener) }

// NewTopology makes a Topology that follows the registry. Run it.
func NewTopology(js jetstream.JetStream, reg Registrations, log *slog.Logger) *Topology {
	t := &Topology{js: js, log: log.With("component", "dispatcher"), wake: make(chan struct{}, 1),
		hooks: map[hookKey]bool{}, gone: map[hookKey]bool{}}
	reg.Subscribe(t.onController)
	return t
}

func (t *Topology) onController(old, cur *registry.Controller) {
	name, declared := declaredHooks(old, cur)
	t.mu.Lock()
	for _, hook := range allHooks {
		key := hookKey{name, hook}
		_, kept := t.hooks[key]
		switch {
		case declared[hook] == nil:
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
func (t *Topology) Run(ctx context.Context) error {
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
func (t *Topology) keep(ctx context.Context) {
	t.mu.Lock()
	hooks, gone := maps.Clone(t.hooks), maps.Clone(t.gone)
	t.mu.Unlock()
	for key := range gone {
		err := t.js.DeleteConsumer(ctx, bus.RequestStream, key.consumer())
		if err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			t.log.Error("delete hook consumer", "controller", key.controller, "hook", key.hook, "err", err)
			continue
		}
		t.mu.Lock()
		delete(t.gone, key)
		t.mu.Unlock()
	}
	for key, created := range hooks {
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
func (t *Topology) ensure(ctx context.Context, key hookKey, created bool) error {
	if created {
		_, err := t.js.Consumer(ctx, bus.RequestStream, key.consumer())
		if !errors.Is(err, jetstream.ErrConsumerNotFound) {
			return err
		}
		t.log.Warn("hook consumer was gone; creating it again", "controller", key.controller, "hook", key.hook)
	}
	_, err := bus.EnsureConsumer(ctx, t.js, bus.RequestStream, HookConsumerConfig(key.controller, key.hook))
	return err
}

// Consumers names the hook consumers of the registered controllers: they
// must exist for the dispatcher to be ready.
func (t *Topology) Consumers() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	names := make([]string, 0, len(t.hooks))
	for key := range t.hooks {
		names = append(names, key.consumer())
	}
	slices.Sort(names)
	return names
}

func (k hookKey) consumer() string { return bus.HookConsumer(k.controller, k.hook) }

// allHooks names every hook a controller may declare.
var allHooks = []string{hooks.Sync, hooks.Finalize, hooks.Customize}

// declaredHooks names the controller of a registry change and the hooks it
// now declares (none once removed).
func declaredHooks(old, cur *registry.Controller) (string, map[string]*v1alpha1.Hook) {
	if cur == nil {
		return old.Name, nil
	}
	return cur.Name, hooksOf(cur)
}

// hooksOf is a controller's declared hooks, by name.
func hooksOf(c *registry.Controller) map[string]*v1alpha1.Hook {
	out := map[string]*v1alpha1.Hook{hooks.Sync: &c.Spec.Hooks.Sync}
	if c.Spec.Hooks.Finalize != nil {
		out[hooks.Finalize] = c.Spec.Hooks.Finalize
	}
	if c.Spec.Hooks.Customize != nil {
		out[hooks.Customize] = c.Spec.Hooks.Customize
	}
	return out
}
