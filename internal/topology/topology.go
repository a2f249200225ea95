// Package topology declares uc's bus in one place: the JetStream streams,
// every durable consumer, every key-value bucket, and, for each party that
// connects to NATS (uc's watcher, dispatcher and applier roles, a
// controller's hook workers, and the inspector and operator commands),
// what it creates, waits for, reads, consumes, deletes, publishes and
// listens to (Role). Everything else derives from these declarations: the
// roles create their streams, consumers and buckets with the configurations
// declared here (and keep them: KeptConsumer, HookConsumers), `uc run`'s
// readiness checks wait for what a Role says it needs (Needs), and
// internal/natsauth turns each Role into the NATS permissions of its user.
//
// The names on the bus — streams, subjects, the hook consumers a worker in
// any language binds to, bucket names and the formats of their values —
// are the public contract, in schemas/bus; this package says how the
// things they name are configured and who does what with them.
package topology

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"universalcontroller.dev/uc/schemas/bus"
)

// Stream is one of uc's JetStream streams. It holds the subjects under its
// prefix.
type Stream struct {
	Name   string
	Prefix string
	config jetstream.StreamConfig
}

// Subjects is the filter subject of every message of the stream.
func (s Stream) Subjects() string { return s.Prefix + ".>" }

// Options tune the streams and buckets to the NATS servers.
type Options struct {
	// Replicas of every stream and bucket: 1 on a single server, 3 on a
	// cluster.
	Replicas int
	// Storage of the streams: jetstream.FileStorage unless set. The
	// buckets are always on files.
	Storage jetstream.StorageType
}

func (o Options) replicas() int { return max(o.Replicas, 1) }

// Config is the stream's configuration on servers of opts.
func (s Stream) Config(opts Options) jetstream.StreamConfig {
	cfg := s.config
	cfg.Name, cfg.Subjects = s.Name, []string{s.Subjects()}
	cfg.Replicas, cfg.Storage = opts.replicas(), opts.Storage
	return cfg
}

// The streams.
var (
	// Requests holds hook requests. One message per subject is what
	// coalesces: a newer observation of a parent replaces the request still
	// waiting for a hook.
	Requests = Stream{Name: bus.RequestStream, Prefix: bus.RequestPrefix, config: jetstream.StreamConfig{
		Description:       "hook requests: the latest observed state of each parent, one message per parent and hook",
		Retention:         jetstream.WorkQueuePolicy,
		MaxMsgsPerSubject: 1,
		Discard:           jetstream.DiscardOld,
		Duplicates:        2 * time.Minute,
	}}
	// Replies holds hook replies until an applier (or, for customize
	// replies, the watcher) has taken them.
	Replies = Stream{Name: bus.ReplyStream, Prefix: bus.ReplyPrefix, config: jetstream.StreamConfig{
		Description: "hook replies waiting for an applier",
		Retention:   jetstream.WorkQueuePolicy,
		Duplicates:  2 * time.Minute,
	}}
	// DeadLetters holds the requests no hook could serve within their
	// maximum deliveries, for a week, and the last MaxDeadLettersPerParent
	// of each parent and hook: a parent whose hook keeps failing is retried
	// on its backoff, each retry dead-lettered again (up to some 600 a
	// week at the 1000 s cap), and its last failures tell all of them.
	DeadLetters = Stream{Name: bus.DeadLetterStream, Prefix: bus.DeadLetterPrefix, config: jetstream.StreamConfig{
		Description:       "requests no hook could serve within their maximum deliveries",
		Retention:         jetstream.LimitsPolicy,
		MaxAge:            7 * 24 * time.Hour,
		MaxMsgsPerSubject: MaxDeadLettersPerParent,
		Discard:           jetstream.DiscardOld,
	}}
	// Plans holds the last plan of each parent of a dry-run controller
	// (spec.dryRun), for a bounded time: the last plan per parent is all
	// uc trace shows.
	Plans = Stream{Name: bus.PlanStream, Prefix: bus.PlanPrefix, config: jetstream.StreamConfig{
		Description:       "the last plan of each parent of a dry-run controller",
		Retention:         jetstream.LimitsPolicy,
		MaxMsgsPerSubject: 1,
		Discard:           jetstream.DiscardOld,
		MaxAge:            bus.PlanMaxAge,
	}}
)

// MaxDeadLettersPerParent bounds the dead letters kept per parent and
// hook (a dead letter's subject, bus.Address.DeadLetterSubject).
const MaxDeadLettersPerParent = 10

// Streams are uc's streams.
var Streams = []Stream{Requests, Replies, DeadLetters, Plans}

// EnsureStreams creates the streams, or updates them to their
// configuration.
func EnsureStreams(ctx context.Context, js jetstream.JetStream, streams []Stream, opts Options) error {
	for _, s := range streams {
		if _, err := js.CreateOrUpdateStream(ctx, s.Config(opts)); err != nil {
			return fmt.Errorf("stream %s: %w", s.Name, err)
		}
	}
	return nil
}
