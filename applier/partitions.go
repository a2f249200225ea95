package applier

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"universalcontroller.dev/uc/internal/shares"
	"universalcontroller.dev/uc/internal/topology"
	"universalcontroller.dev/uc/schemas/bus"
)

// Partition ownership. The applier replicas split the partitions among
// themselves with internal/shares, through topology.Appliers and
// topology.Partitions: a replica consumes, with the partition's own durable
// consumer, only the partitions it holds. When a partition moves, its
// owner stops consuming it, gives its waiting replies back to the bus and
// waits for its applies in flight before the newcomer takes it; so a
// parent is applied by one replica at a time, even while ownership moves.

// PartitionCaches fill the caches of the partitions this replica holds:
// an applier replica's registry in a sharded installation
// (registry.WithHeldPartitions) caches only their parents, children and
// revisions. A partition is taken (Hold) before its replies are consumed,
// and applied once its caches are filled (WaitHeld); it is given back
// (Release) once its applies in flight have ended.
type PartitionCaches interface {
	Hold(n int)
	WaitHeld(ctx context.Context, n int) error
	Release(n int)
}

// allCached are the caches of a replica that caches every partition.
type allCached struct{}

func (allCached) Hold(int)                            {}
func (allCached) WaitHeld(context.Context, int) error { return nil }
func (allCached) Release(int)                         {}

// partition is one partition this replica holds: its consumer, and the
// hold on it. The holder creates it and hands it to intake, which begins
// its applies while the hold lasts.
type partition struct {
	n        int
	consumer *topology.KeptConsumer
	// hold lasts while this replica may apply the partition: an apply in
	// flight stops when it ends (intake.applyNext), and each write checks
	// it (the gate).
	hold      *shares.Hold
	releasing bool           // guarded by intake's lock
	active    sync.WaitGroup // applies in flight

	// parents is what the reconciler knows of the partition's parents
	// while this replica holds it.
	parents *knownParents
	// cached waits until the partition's caches are filled.
	cached func(ctx context.Context) error
}

// newPartition is partition n, consumed by consumer, held while hold
// lasts, its objects in caches.
func newPartition(n int, consumer *topology.KeptConsumer, hold *shares.Hold, caches PartitionCaches) *partition {
	return &partition{n: n, consumer: consumer, hold: hold, parents: newKnownParents(),
		cached: func(ctx context.Context) error { return caches.WaitHeld(ctx, n) }}
}

// holder is the applier's shares.Holder: it consumes each partition
// this replica holds and hands it to intake, and takes it back.
type holder struct {
	in  *intake
	js  jetstream.JetStream
	log *slog.Logger
	// unsettled keeps the replies this replica has not settled — queued
	// for their parent's turn, waiting for a retry, being applied — from
	// being delivered again after the consumers' short ack wait.
	unsettled *bus.Unsettled
	// lost hears that a partition's consumption reported its consumer
	// lost: the shares' next balance, at once, checks the consumers.
	lost func()
	// taken hears that a partition was taken: the labeller looks over
	// its objects.
	taken func()
	// caches hold the objects of the partitions held.
	caches PartitionCaches
}

// newShares is the applier's shares of the partitions, handed to its
// intake by a holder.
func newShares(ctx context.Context, js jetstream.JetStream, in *intake, opts Options, log *slog.Logger) (*shares.Shares, *holder, error) {
	caches := opts.Caches
	if caches == nil {
		caches = allCached{}
	}
	h := &holder{in: in, js: js, log: log, unsettled: bus.NewUnsettled(), taken: func() {}, caches: caches}
	s, err := shares.New(ctx, js, h, shares.Options{
		Partitions: opts.Partitions, Replicas: opts.Replicas, ReplicaID: opts.ReplicaID,
		Members: topology.Appliers, Keys: topology.Partitions,
		// The applier's other bucket, created again with them.
		Kept: []topology.Bucket{topology.Fence},
		Role: "applier",
	}, log)
	if err != nil {
		return nil, nil, err
	}
	h.lost = s.Wake
	return s, h, nil
}

// Take starts filling partition n's caches and consuming it; its applies
// wait for the caches (applyNext).
func (h *holder) Take(ctx context.Context, n int, hold *shares.Hold) error {
	h.caches.Hold(n)
	consumer, err := topology.KeepConsuming(ctx, h.js, topology.ApplierConsumer(n),
		func(msg jetstream.Msg) { h.in.receive(h.unsettled.Track(msg)) }, h.lost, topology.PullAhead(pullAhead))
	if err != nil {
		h.caches.Release(n)
		return fmt.Errorf("consume partition: %w", err)
	}
	p := newPartition(n, consumer, hold, h.caches)
	h.in.hold(p)
	h.taken()
	if _, all := h.caches.(allCached); !all {
		go h.logCached(p)
	}
	return nil
}

// logCached says when the caches of a partition just taken are filled: its
// applies waited until then.
func (h *holder) logCached(p *partition) {
	start := time.Now()
	if err := p.cached(p.hold.Context()); err != nil {
		h.log.Warn("the partition's caches were not filled while it was held", "partition", p.n, "err", err)
		return
	}
	h.log.Info("partition cached", "partition", p.n, "after", time.Since(start).Round(time.Millisecond))
}

// Renewed makes sure the consumer of partition n exists and is consumed.
func (h *holder) Renewed(ctx context.Context, n int) {
	p := h.in.partition(n)
	recreated, err := p.consumer.Check(ctx)
	switch {
	case err != nil:
		h.log.Warn("check the partition's consumer", "partition", n, "err", err)
	case recreated:
		h.log.Warn("the partition's consumer was gone or no longer consumed; consuming it again", "partition", n, "consumer", p.consumer.Consumer().Name())
	}
}

// Give stops consuming partition n: no apply of it begins any more, its
// waiting replies go back to the bus, and its applies in flight end; then
// its caches go.
func (h *holder) Give(n int) {
	p := h.in.drop(n)
	p.consumer.Drain()
	h.in.giveBack(n)
	p.active.Wait()
	h.caches.Release(n)
}
