package applier

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"universalcontroller.dev/uc/internal/topology"
	"universalcontroller.dev/uc/internal/verdict"
	"universalcontroller.dev/uc/schemas/bus"
)

// Partition ownership. Parents are spread over P partitions (bus.Partition).
// Every applier replica heartbeats in topology.Appliers; the live replicas
// split the partitions by rendezvous hashing with bounded loads (assign), and
// a replica holds a partition through a key in topology.Partitions that it
// created and renews (both buckets expire keys after leaseTTL). A replica
// consumes, with the partition's own durable consumer, only the partitions it
// holds. When a replica joins, the owners of the partitions it should get
// stop consuming them, wait for their applies in flight, and delete their
// keys; the newcomer then creates the keys. When a replica dies, its keys
// expire, and the other replicas take its partitions; a replica restarted
// with its id (Options.ReplicaID) takes its own back at once. So a parent is
// applied by one replica at a time, even while ownership moves.
//
// The lease is short so that a dead replica's partitions move within
// seconds: renewed every 2 s, a key outlives three missed renewals.
const (
	leaseTTL   = topology.LeaseTTL
	renewEvery = 2 * time.Second
	// A replica stops applying a partition it could not renew for this long,
	// well before its key can expire and another replica take it.
	staleAfter = leaseTTL - renewEvery
)

// partition is one partition this replica holds: its consumer, and the
// hold on it. The owner creates it and hands it to intake, which begins its
// applies while the hold lasts.
type partition struct {
	n        int
	consumer *topology.KeptConsumer
	// rev is the revision of its key in uc_partitions; only the owner's
	// goroutine reads and writes it.
	rev       uint64
	releasing bool           // guarded by intake's lock
	active    sync.WaitGroup // applies in flight

	mu sync.Mutex // guards the hold
	// renewed is when the last successful renewal of its key was sent.
	renewed time.Time
	// hold ends when this replica may no longer apply the partition: its
	// key was not renewed for staleAfter (expiry), or a renewal failed. An
	// apply in flight then stops (intake.applyNext), as another replica may
	// take the partition once the key expires. A renewal after a lapse
	// starts a new hold.
	hold   context.Context
	lapse  context.CancelCauseFunc
	expiry *time.Timer

	// parents is what the reconciler knows of the partition's parents
	// while this replica holds it.
	parents *knownParents
}

// owner runs the ownership protocol for one replica. It hands the
// partitions it acquires to intake, and takes them back, through intake's
// methods.
type owner struct {
	in              *intake
	js              jetstream.JetStream
	opts            Options // Partitions, Replicas, ReplicaID
	log             *slog.Logger
	id              string
	members, owners jetstream.KeyValue
	// lost hears that a partition's consumption reported its consumer
	// lost: balance then checks the consumers at once.
	lost chan struct{}
	// unsettled keeps the replies this replica has not settled — queued
	// for their parent's turn, waiting for a retry, being applied — from
	// being delivered again after the consumers' short ack wait.
	unsettled *bus.Unsettled
}

func newOwner(ctx context.Context, js jetstream.JetStream, in *intake, opts Options, log *slog.Logger) (*owner, error) {
	id := opts.ReplicaID
	if id == "" {
		host, _ := os.Hostname()
		id = host + "_" + uuid.NewString()[:8]
	}
	o := &owner{in: in, js: js, opts: opts, log: log, id: bus.Token(id), lost: make(chan struct{}, 1), unsettled: bus.NewUnsettled()}
	var err error
	bucketOpts := topology.Options{Replicas: opts.Replicas}
	if o.members, err = topology.EnsureBucket(ctx, js, topology.Appliers, bucketOpts); err != nil {
		return nil, err
	}
	if o.owners, err = topology.EnsureBucket(ctx, js, topology.Partitions, bucketOpts); err != nil {
		return nil, err
	}
	return o, nil
}

// run balances partitions every renewEvery, and when a consumption reports
// its consumer lost, until ctx ends; then it leaves: its membership first,
// so that the other replicas take its partitions as soon as it releases
// them. The replies it has not settled are kept from redelivery until then.
func (o *owner) run(ctx context.Context) {
	tracking, stopTracking := context.WithCancel(context.WithoutCancel(ctx))
	defer stopTracking()
	go o.unsettled.Run(tracking, bus.ProgressEvery)
	tick := time.NewTicker(renewEvery)
	defer tick.Stop()
	for {
		o.balance(ctx)
		select {
		case <-ctx.Done():
			leave, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if err := o.members.Delete(leave, o.id); err != nil {
				o.log.Warn("leave the appliers", "replica", o.id, "err", err)
			}
			for _, p := range o.in.heldPartitions() {
				o.release(leave, p)
			}
			cancel()
			return
		case <-tick.C:
		case <-o.lost:
		}
	}
}

// consumerLost wakes run: a partition's consumer may be gone.
func (o *owner) consumerLost() {
	select {
	case o.lost <- struct{}{}:
	default:
	}
}

// checkBuckets creates again the applier's buckets that are gone: a NATS
// server that lost its files, or an operator, may have removed them. The
// keys they held are lost: a replica whose partition key is gone stops
// consuming the partition when its renewal fails, and takes it again.
func (o *owner) checkBuckets(ctx context.Context) {
	for _, b := range topology.Applier(o.opts.Partitions).Creates.Buckets {
		_, err := o.js.KeyValue(ctx, b.Name)
		if err == nil {
			continue
		}
		if !errors.Is(err, jetstream.ErrBucketNotFound) {
			o.log.Warn("check bucket", "bucket", b.Name, "err", err)
			continue
		}
		if _, err := topology.EnsureBucket(ctx, o.js, b, topology.Options{Replicas: o.opts.Replicas}); err != nil {
			o.log.Error("create again a bucket that is gone", "bucket", b.Name, "err", err)
			continue
		}
		o.log.Warn("bucket was gone; created it again", "bucket", b.Name)
	}
}

// balance heartbeats, renews or releases the partitions held, and tries to
// acquire those this replica should hold. Acquiring stops after renewEvery,
// to renew in time what it holds (a slow bus makes each acquisition slow);
// the rest waits for the next round.
func (o *owner) balance(ctx context.Context) {
	deadline := time.Now().Add(renewEvery)
	o.checkBuckets(ctx)
	if _, err := o.members.Put(ctx, o.id, nil); err != nil {
		o.log.Warn("applier heartbeat", "err", err)
	}
	members, err := o.members.Keys(ctx)
	if err != nil || !slices.Contains(members, o.id) {
		members = append(members, o.id)
	}
	want := map[int]bool{}
	for n, m := range assign(members, o.opts.Partitions) {
		if m == o.id {
			want[n] = true
		}
	}
	for _, p := range o.in.heldPartitions() {
		if want[p.n] {
			o.renew(ctx, p)
		} else {
			o.release(ctx, p)
		}
	}
	for n := range want {
		if time.Now().After(deadline) {
			return
		}
		o.acquire(ctx, n)
	}
}

// assign splits the partitions over the members: each member holds its share,
// partitions / members rounded down or up, and each partition goes to the
// member that scores it highest (rendezvous hashing) among those with room.
// The (partition, member) pairs are taken by descending score, so the result
// depends only on the set of members, every replica computes the same one,
// and a member joining or leaving moves few partitions besides its own share.
// Plain rendezvous hashing, without the bound, split 32 partitions 10/22 over
// two replicas.
func assign(members []string, partitions int) map[int]string {
	type pair struct {
		n      int
		member string
		score  uint64
	}
	pairs := make([]pair, 0, partitions*len(members))
	for n := range partitions {
		for _, m := range members {
			pairs = append(pairs, pair{n, m, score(m, n)})
		}
	}
	slices.SortFunc(pairs, func(a, b pair) int {
		if c := cmp.Compare(b.score, a.score); c != 0 {
			return c
		}
		return cmp.Or(cmp.Compare(a.member, b.member), cmp.Compare(a.n, b.n))
	})
	// Every member holds lo partitions, and extra of them one more.
	lo, extra := partitions/max(len(members), 1), partitions%max(len(members), 1)
	owners := make(map[int]string, partitions)
	held := map[string]int{}
	for _, p := range pairs {
		h := held[p.member]
		if _, taken := owners[p.n]; taken || h > lo || (h == lo && extra == 0) {
			continue
		}
		if h == lo {
			extra--
		}
		owners[p.n] = p.member
		held[p.member]++
	}
	return owners
}

// score is a member's rendezvous score for partition n: a well-mixed hash
// (FNV's scores correlate across partitions and gave one member everything).
func score(member string, n int) uint64 {
	sum := sha256.Sum256(fmt.Appendf(nil, "%s/%d", member, n))
	return binary.BigEndian.Uint64(sum[:8])
}

// reclaim takes back a partition whose key names this replica: a key left
// by this replica's previous run, which is dead since its id is now ours.
func (o *owner) reclaim(ctx context.Context, n int) (uint64, error) {
	e, err := o.owners.Get(ctx, bus.PartitionKey(n))
	if err != nil {
		return 0, err
	}
	if string(e.Value()) != o.id {
		return 0, jetstream.ErrKeyExists
	}
	rev, err := o.owners.Update(ctx, bus.PartitionKey(n), []byte(o.id), e.Revision())
	if err == nil {
		o.log.Info("partition reclaimed from this replica's previous run", "partition", n, "replica", o.id)
	}
	return rev, err
}

// acquire takes partition n if no replica holds it, and starts consuming it.
func (o *owner) acquire(ctx context.Context, n int) {
	if o.in.holds(n) {
		return
	}
	sent := time.Now()
	rev, err := o.owners.Create(ctx, bus.PartitionKey(n), []byte(o.id))
	if errors.Is(err, jetstream.ErrKeyExists) && o.opts.ReplicaID != "" {
		rev, err = o.reclaim(ctx, n)
	}
	if err != nil {
		if !errors.Is(err, jetstream.ErrKeyExists) {
			o.log.Warn("acquire partition", "partition", n, "err", err)
		}
		return
	}
	consumer, err := topology.KeepConsuming(ctx, o.js, topology.ApplierConsumer(n),
		func(msg jetstream.Msg) { o.in.receive(o.unsettled.Track(msg)) }, o.consumerLost)
	if err != nil {
		o.log.Error("consume partition", "partition", n, "err", err)
		_ = o.owners.Delete(ctx, bus.PartitionKey(n), jetstream.LastRevision(rev))
		return
	}
	p := newPartition(n, consumer, rev, sent)
	o.in.hold(p)
	o.log.Info("partition acquired", "partition", n, "replica", o.id)
}

// renew extends the hold on a partition, and makes sure its consumer exists
// and is consumed; losing the hold stops its consumption.
func (o *owner) renew(ctx context.Context, p *partition) {
	sent := time.Now()
	rev, err := o.owners.Update(ctx, bus.PartitionKey(p.n), []byte(o.id), p.rev)
	if err != nil {
		o.log.Error("partition lost", "partition", p.n, "err", err)
		p.end(fmt.Errorf("%w: renewal failed: %w", errHoldLost, err))
		o.stop(p)
		return
	}
	p.rev = rev
	p.extend(sent)
	recreated, err := p.consumer.Check(ctx)
	switch {
	case err != nil:
		o.log.Warn("check the partition's consumer", "partition", p.n, "err", err)
	case recreated:
		o.log.Warn("the partition's consumer was gone or no longer consumed; consuming it again", "partition", p.n, "consumer", p.consumer.Consumer().Name())
	}
}

// release hands a partition over: stop consuming it, give its waiting
// replies back to the bus, wait for its applies in flight, delete its key.
func (o *owner) release(ctx context.Context, p *partition) {
	o.stop(p)
	if err := o.owners.Delete(ctx, bus.PartitionKey(p.n), jetstream.LastRevision(p.rev)); err != nil {
		o.log.Warn("release partition", "partition", p.n, "err", err)
	}
	o.log.Info("partition released", "partition", p.n, "replica", o.id)
}

// stop stops consuming a partition: no apply of it begins any more, its
// waiting replies go back to the bus, and its applies in flight end.
func (o *owner) stop(p *partition) {
	o.in.drop(p)
	p.consumer.Drain()
	o.in.giveBack(p.n)
	p.active.Wait()
	p.end(fmt.Errorf("%w: released", errHoldLost))
}

// newPartition is partition n, held through revision rev of its key,
// created or renewed at sent.
func newPartition(n int, consumer *topology.KeptConsumer, rev uint64, sent time.Time) *partition {
	p := &partition{n: n, consumer: consumer, rev: rev, parents: newKnownParents()}
	p.extend(sent)
	return p
}

// errHoldLost ends the applies of a partition this replica may no longer
// hold. It waits (verdict.Wait), no failure: the apply is retried in a new
// hold, or the parent's replies go back to the replica that holds it.
var errHoldLost = verdict.Wait.Mark(errors.New("the hold on the partition lapsed"))

// extend records a renewal of p's key sent at sent: p may be applied until
// staleAfter from then.
func (p *partition) extend(sent time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.renewed = sent
	if p.hold == nil || p.hold.Err() != nil {
		p.hold, p.lapse = context.WithCancelCause(context.Background())
	}
	left := staleAfter - time.Since(sent)
	if p.expiry == nil {
		p.expiry = time.AfterFunc(left, p.expire)
	} else {
		p.expiry.Reset(left)
	}
}

// expire ends the hold unless a renewal came in time (the timer may fire
// while extend resets it).
func (p *partition) expire() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if time.Since(p.renewed) >= staleAfter {
		p.lapse(fmt.Errorf("%w: not renewed for %s", errHoldLost, staleAfter))
	}
}

// end ends the hold with cause.
func (p *partition) end(cause error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.expiry.Stop()
	p.lapse(cause)
}

// whileHeld is ctx, ended with the hold's cause when the hold ends.
func whileHeld(ctx, hold context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(hold, func() { cancel(context.Cause(hold)) })
	return ctx, func() {
		stop()
		cancel(nil)
	}
}
