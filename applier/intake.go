package applier

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"

	"universalcontroller.dev/uc/internal/recovery"
	"universalcontroller.dev/uc/internal/topology"
	"universalcontroller.dev/uc/internal/workloop"
	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
)

// intake takes the replies of the partitions this replica holds off the
// bus and hands them to the reconciler, one parent at a time. It keeps the
// newest replies of each parent (pending), queues the parent once it has
// every reply of its newest observation, runs the worker loop over that
// queue, and puts a batch whose apply failed back for the retry. It keeps
// the partitions this replica holds (held); the holder (partitions.go) adds
// and removes them through its methods. Its lock guards pending, held and
// room, and only its methods take it.
//
// It takes in only as many parents as its workers will soon apply
// (waitForRoom): in a burst, the replies past those wait in the stream,
// where they cost nothing, rather than in this process, which would have
// to keep each from being delivered again, an in-progress ack every
// bus.ProgressEvery, until its turn — a cost that grows with the square
// of the burst (BENCHMARKS.md, 50,000 × 5).
type intake struct {
	log       *slog.Logger
	observer  Observer
	rec       parentApplier
	queue     workqueue.TypedRateLimitingInterface[types.UID]
	maxQueued int // parents queued for the workers past which a new parent's reply waits

	mu      sync.Mutex
	pending map[types.UID]*batch // newest replies per parent (bus.Address.ApplyKey), not yet being applied
	held    map[int]*partition   // the partitions this replica holds
	room    chan struct{}        // closed, and made anew, when the workers take a parent (makeRoom)
	waiting int                  // replies waiting for room
}

// queuedPerWorker is how many parents per worker the intake queues at most
// before it waits for room: enough that a worker finds the next parent
// queued when it is done with one, while the next replies come off the
// bus.
const queuedPerWorker = 8

// pullAhead is how many replies a partition's consumption pulls ahead of
// the intake (topology.PullAhead): one, so that while the intake waits
// for room, a partition's next reply does not wait unacknowledged for
// long enough to be delivered again.
const pullAhead = 1

// parentApplier is what intake hands the replies it takes to: the
// reconciler (reconcile.go).
type parentApplier interface {
	// apply makes the cluster match a parent's batch of replies, while
	// ctx lasts: it ends when this replica's hold on the partition does.
	// parents is what the replica knows of the partition's parents. A nil
	// error acknowledges the replies; an error retries them.
	apply(ctx context.Context, parents *knownParents, b *batch) error
	// receiveShadow takes a reply of a sync hook's shadow: never applied,
	// it is acknowledged before.
	receiveShadow(r *reply)
}

func newIntake(rec parentApplier, observer Observer, workers int, log *slog.Logger) *intake {
	limiter := workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[types.UID](100*time.Millisecond, 30*time.Second),
		&workqueue.TypedBucketRateLimiter[types.UID]{Limiter: rate.NewLimiter(rate.Limit(50), 300)},
	)
	return &intake{
		log: log, observer: observer, rec: rec,
		queue:     workqueue.NewTypedRateLimitingQueueWithConfig(limiter, workqueue.TypedRateLimitingQueueConfig[types.UID]{Name: "replies"}),
		maxQueued: queuedPerWorker * workers,
		pending:   map[types.UID]*batch{},
		held:      map[int]*partition{},
		room:      make(chan struct{}),
	}
}

// work applies the queued parents with workers workers until shutDown.
func (in *intake) work(ctx context.Context, workers int) {
	in.loop().Run(ctx, in.queue, workers)
}

// shutDown stops the workers once their applies end.
func (in *intake) shutDown() {
	in.queue.ShutDown()
	in.makeRoom()
}

// failures counts the applies of the parent with that apply key that
// failed in a row.
func (in *intake) failures(uid types.UID) int { return in.queue.NumRequeues(uid) }

// receive keeps the newest replies of each parent and queues the parent once
// it has every reply of its newest observation.
func (in *intake) receive(msg jetstream.Msg) {
	e, err := bus.FromMsg(context.Background(), msg.Subject(), msg.Headers(), msg.Data())
	var meta bus.Meta
	if err == nil {
		meta, err = bus.MetaOfReply(msg.Subject(), e)
	}
	if err != nil {
		in.log.Error("dropping a reply that is not a uc reply", "subject", msg.Subject(), "err", err)
		_ = msg.Term()
		return
	}
	r := &reply{msg: msg, meta: meta, typ: e.Type(), data: e.Data(), sent: e.Time(),
		span: trace.SpanContextFromContext(bus.ExtractTrace(context.Background(), e))}
	if meta.Hook == hooks.SyncShadow {
		_ = msg.Ack() // never applied
		in.rec.receiveShadow(r)
		return
	}
	key := meta.ApplyKey()
	in.waitForRoom(key, meta.Partition)
	in.mu.Lock()
	b := in.pending[key]
	if b != nil && b.meta.Observation > meta.Observation {
		in.mu.Unlock()
		_ = msg.Ack() // an older observation than one already waiting
		return
	}
	var superseded *batch
	if b == nil || b.meta.Observation < meta.Observation {
		superseded, b = b, newBatch(meta)
		in.pending[key] = b
	}
	replaced := b.add(r)
	complete := b.complete()
	in.mu.Unlock()
	if superseded != nil {
		superseded.each(ack)
	}
	if replaced != nil && !bus.SameMessage(replaced.msg, msg) {
		_ = replaced.msg.Ack() // superseded by r
	}
	if complete {
		in.queue.Add(key)
	}
}

// waitForRoom waits, before a reply of a parent with none waiting goes
// in, while maxQueued parents or more are queued for the workers. A reply
// of a parent already waiting goes in at once: it completes or supersedes
// its batch, and adds no parent. The wait ends with the hold on the
// reply's partition (drop) or with the intake (shutDown).
func (in *intake) waitForRoom(key types.UID, partition int) {
	for {
		in.mu.Lock()
		_, waiting := in.pending[key]
		p := in.held[partition]
		if waiting || p == nil || p.releasing || in.queue.ShuttingDown() || in.queue.Len() < in.maxQueued {
			in.mu.Unlock()
			return
		}
		room := in.room
		in.waiting++
		in.mu.Unlock()
		<-room
		in.mu.Lock()
		in.waiting--
		in.mu.Unlock()
	}
}

// makeRoom wakes the replies waiting for room (waitForRoom) to look again.
func (in *intake) makeRoom() {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.wake()
}

// wake is makeRoom with the lock held. With no reply waiting, no one
// holds the channel, and it stays: most applies come with none waiting.
func (in *intake) wake() {
	if in.waiting == 0 {
		return
	}
	close(in.room)
	in.room = make(chan struct{})
}

// applyTimeout bounds one apply: a hung apiserver call must not hold a
// parent, and with it its partition's hand-over, forever. An apply makes a
// few reads and the writes of one reply, 8 at a time, each bounded by the
// REST client's own timeout: two minutes is far beyond a healthy apply,
// even of a reply with thousands of children. A failed apply is retried.
const applyTimeout = 2 * time.Minute

// loop is the applier's worker loop: it applies one parent's replies at a
// time, each within applyTimeout.
func (in *intake) loop() workloop.Loop[types.UID] {
	return workloop.Loop[types.UID]{
		Component: recovery.Applier,
		Timeout:   applyTimeout,
		Sync:      in.applyNext,
		Failed: func(uid types.UID, err error) {
			meta := in.pendingMeta(uid)
			in.log.Error("apply failed; will retry", append(meta.LogArgs(), "failures", in.queue.NumRequeues(uid)+1, "err", err)...)
			in.observer.Failed(meta)
		},
		Log:     in.log,
		LogArgs: func(uid types.UID) []any { return in.pendingMeta(uid).LogArgs() },
	}
}

// pendingMeta is the meta of the replies waiting for the parent with that
// apply key, or only the key when none wait.
func (in *intake) pendingMeta(uid types.UID) bus.Meta {
	in.mu.Lock()
	defer in.mu.Unlock()
	if b := in.pending[uid]; b != nil {
		return b.meta
	}
	return bus.Meta{Address: bus.Address{ParentUID: uid}}
}

// applyNext applies the replies waiting for the parent with that apply key,
// once they are complete, while this replica holds the parent's partition:
// once the hold ends, another replica may apply the parent, and this apply
// stops before its next write. Replies that were not applied — an error, a
// panic — are put back for the retry.
func (in *intake) applyNext(ctx context.Context, uid types.UID) error {
	in.makeRoom() // the workers took uid off the queue
	b := in.take(uid)
	if b == nil {
		return nil
	}
	part, ok := in.begin(b.meta.Partition)
	if !ok {
		b.each(nak) // the partition moved to another replica
		return nil
	}
	defer part.active.Done()
	applied := false
	defer func() {
		if !applied {
			in.putBack(uid, b)
		}
	}()
	ctx, cancel := part.hold.WhileHeld(ctx)
	defer cancel()
	if err := part.cached(ctx); err != nil {
		return fmt.Errorf("caches of partition %d: %w", part.n, err)
	}
	ctx = withGate(ctx, part.hold.Check)
	if err := in.rec.apply(ctx, part.parents, b); err != nil {
		return err
	}
	applied = true
	b.each(ack)
	return nil
}

// take takes the replies waiting for the parent with that apply key off
// pending, if they are complete; nil otherwise.
func (in *intake) take(uid types.UID) *batch {
	in.mu.Lock()
	defer in.mu.Unlock()
	b := in.pending[uid]
	if b == nil || !b.complete() {
		return nil
	}
	delete(in.pending, uid)
	return b
}

// putBack puts a failed batch back unless newer replies arrived meanwhile.
func (in *intake) putBack(uid types.UID, b *batch) {
	in.mu.Lock()
	defer in.mu.Unlock()
	newer := in.pending[uid]
	if newer == nil {
		in.pending[uid] = b
	}
	switch {
	case newer == nil:
		b.each(inProgress)
	case newer.meta.Observation > b.meta.Observation:
		b.each(ack)
	default:
		// The same replies, delivered again while b was applied: b is
		// complete, keep it.
		in.pending[uid] = b
	}
}

// heldPartitions are the partitions this replica holds.
func (in *intake) heldPartitions() []*partition {
	in.mu.Lock()
	defer in.mu.Unlock()
	out := make([]*partition, 0, len(in.held))
	for _, p := range in.held {
		out = append(out, p)
	}
	return out
}

// partition is partition n if this replica holds it, or nil.
func (in *intake) partition(n int) *partition {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.held[n]
}

// hold adds a partition this replica now holds and consumes.
func (in *intake) hold(p *partition) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.held[p.n] = p
}

// drop removes partition n, which this replica holds and stops holding:
// no apply of it begins any more. It returns the partition.
func (in *intake) drop(n int) *partition {
	in.mu.Lock()
	defer in.mu.Unlock()
	p := in.held[n]
	p.releasing = true
	delete(in.held, n)
	in.wake() // its replies waiting for room go in, to be given back
	return p
}

// giveBack gives the replies waiting for parents of partition n back to
// the bus, for the replica that takes the partition.
func (in *intake) giveBack(n int) {
	in.mu.Lock()
	defer in.mu.Unlock()
	for uid, b := range in.pending {
		if b.meta.Partition == n {
			delete(in.pending, uid)
			b.each(nak)
		}
	}
}

// begin marks an apply of partition n in flight, if this replica may apply
// it now, and returns the partition; end the apply with p.active.Done().
func (in *intake) begin(n int) (*partition, bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	p := in.held[n]
	if p == nil || p.releasing || p.hold.Err() != nil {
		return nil, false
	}
	p.active.Add(1)
	return p, true
}

// consumers names the consumers of the partitions this replica holds.
func (in *intake) consumers() []topology.Consumer {
	in.mu.Lock()
	defer in.mu.Unlock()
	cs := make([]topology.Consumer, 0, len(in.held))
	for _, p := range in.held {
		cs = append(cs, p.consumer.Consumer())
	}
	slices.SortFunc(cs, func(a, b topology.Consumer) int { return strings.Compare(a.Name(), b.Name()) })
	return cs
}
