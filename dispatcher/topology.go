// Package dispatcher owns the bus topology — the JetStream streams, and one
// durable consumer per hook of every registered controller — and delivers
// requests to hooks that are not on the bus (Dispatcher): webhooks and
// Knative Addressables, over HTTP. Package dispatcher/worker is the Go SDK
// for hooks that are; the dispatcher serves its hooks with it too, so both
// keep the same delivery promises.
package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/util/wait"

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
// controller's hook.
func HookConsumerConfig(controller, hook string) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:       bus.HookConsumer(controller, hook),
		Description:   fmt.Sprintf("%s hook of controller %s", hook, controller),
		FilterSubject: bus.HookRequests(controller, hook),
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       30 * time.Second,
		MaxAckPending: 1000,
		MemoryStorage: bus.ConsumerStateInMemory,
	}
}

// Topology keeps one hook consumer per hook of every registered controller.
type Topology struct {
	js  jetstream.JetStream
	log *slog.Logger
}

// NewTopology makes a Topology that follows the registry.
func NewTopology(js jetstream.JetStream, reg *registry.Registry, log *slog.Logger) *Topology {
	t := &Topology{js: js, log: log.With("component", "dispatcher")}
	reg.Subscribe(t.onController)
	return t
}

func (t *Topology) onController(old, cur *registry.Controller) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if cur == nil {
		for _, hook := range allHooks {
			err := t.js.DeleteConsumer(ctx, bus.RequestStream, bus.HookConsumer(old.Name, hook))
			if err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
				t.log.Error("delete hook consumer", "controller", old.Name, "hook", hook, "err", err)
			}
		}
		return
	}
	for hook := range hooksOf(cur) {
		go t.ensureConsumer(cur.Name, hook)
	}
}

// ensureConsumer creates a hook's consumer, retrying while the bus is down
// or electing a leader (it drops requests then), for up to 5 minutes.
func (t *Topology) ensureConsumer(controller, hook string) {
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		attempt, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if _, err := bus.EnsureConsumer(attempt, t.js, bus.RequestStream, HookConsumerConfig(controller, hook)); err != nil {
			t.log.Warn("retrying", "what", "create hook consumer", "controller", controller, "hook", hook, "err", err)
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		t.log.Error("create hook consumer", "controller", controller, "hook", hook, "err", err)
	}
}

// allHooks names every hook a controller may declare.
var allHooks = []string{hooks.Sync, hooks.Finalize, hooks.Customize}

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
