package applier

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/types"

	"universalcontroller.dev/uc/internal/topology"
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

// partition is one partition this replica holds.
type partition struct {
	n         int
	consumer  *topology.KeptConsumer
	rev       uint64 // revision of its key in uc_partitions
	releasing bool
	active    sync.WaitGroup // applies in flight

	mu sync.Mutex // guards the hold, fenced, deferred and rolling
	// renewed is when the last successful renewal of its key was sent.
	renewed time.Time
	// hold ends when this replica may no longer apply the partition: its
	// key was not renewed for staleAfter (expiry), or a renewal failed. An
	// apply in flight then stops (applyHeld), as another replica may
	// take the partition once the key expires. A renewal after a lapse
	// starts a new hold.
	hold   context.Context
	lapse  context.CancelCauseFunc
	expiry *time.Timer
	// fenced caches the fence of the partition's parents: while a replica
	// holds a partition, it alone advances their fences, so what it read
	// or wrote since it took the partition is current.
	fenced map[types.UID]int64
	// deferred holds the parents whose last apply left their status to the
	// next one (see deferStatus).
	deferred map[types.UID]bool
	// rolling holds the progress of the partition's parents whose
	// children are not all on their latest revision.
	rolling map[types.UID]rolloutProgress
}

// owner runs the ownership protocol for one replica.
type owner struct {
	a               *Applier
	id              string
	members, owners jetstream.KeyValue
	// lost hears that a partition's consumption reported its consumer
	// lost: balance then checks the consumers at once.
	lost chan struct{}
	// holder keeps the replies this replica holds — queued for their
	// parent's turn, waiting for a retry, being applied — from being
	// delivered again after the consumers' short ack wait.
	holder *bus.Holder
}

func newOwner(ctx context.Context, a *Applier) (*owner, error) {
	id := a.opts.ReplicaID
	if id == "" {
		host, _ := os.Hostname()
		id = host + "_" + uuid.NewString()[:8]
	}
	o := &owner{a: a, id: bus.Token(id), lost: make(chan struct{}, 1), holder: bus.NewHolder()}
	var err error
	opts := topology.Options{Replicas: a.opts.Replicas}
	if o.members, err = topology.EnsureBucket(ctx, a.js, topology.Appliers, opts); err != nil {
		return nil, err
	}
	if o.owners, err = topology.EnsureBucket(ctx, a.js, topology.Partitions, opts); err != nil {
		return nil, err
	}
	return o, nil
}

// run balances partitions every renewEvery, and when a consumption reports
// its consumer lost, until ctx ends; then it leaves: its membership first,
// so that the other replicas take its partitions as soon as it releases
// them. The replies it holds are kept from redelivery until then.
func (o *owner) run(ctx context.Context) {
	holding, stopHolding := context.WithCancel(context.WithoutCancel(ctx))
	defer stopHolding()
	go o.holder.Run(holding, bus.ProgressEvery)
	tick := time.NewTicker(renewEvery)
	defer tick.Stop()
	for {
		o.balance(ctx)
		select {
		case <-ctx.Done():
			leave, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if err := o.members.Delete(leave, o.id); err != nil {
				o.a.log.Warn("leave the appliers", "replica", o.id, "err", err)
			}
			for _, p := range o.a.heldPartitions() {
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
	for _, b := range topology.Applier(o.a.opts.Partitions).Creates.Buckets {
		_, err := o.a.js.KeyValue(ctx, b.Name)
		if err == nil {
			continue
		}
		if !errors.Is(err, jetstream.ErrBucketNotFound) {
			o.a.log.Warn("check bucket", "bucket", b.Name, "err", err)
			continue
		}
		if _, err := topology.EnsureBucket(ctx, o.a.js, b, topology.Options{Replicas: o.a.opts.Replicas}); err != nil {
			o.a.log.Error("create again a bucket that is gone", "bucket", b.Name, "err", err)
			continue
		}
		o.a.log.Warn("bucket was gone; created it again", "bucket", b.Name)
	}
}

// heldPartitions are the partitions this replica holds.
func (a *Applier) heldPartitions() []*partition {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]*partition, 0, len(a.held))
	for _, p := range a.held {
		out = append(out, p)
	}
	return out
}

// balance heartbeats, renews or releases the partitions held, and tries to
// acquire those this replica should hold. Acquiring stops after renewEvery,
// to renew in time what it holds (a slow bus makes each acquisition slow);
// the rest waits for the next round.
func (o *owner) balance(ctx context.Context) {
	deadline := time.Now().Add(renewEvery)
	o.checkBuckets(ctx)
	if _, err := o.members.Put(ctx, o.id, nil); err != nil {
		o.a.log.Warn("applier heartbeat", "err", err)
	}
	members, err := o.members.Keys(ctx)
	if err != nil || !slices.Contains(members, o.id) {
		members = append(members, o.id)
	}
	want := map[int]bool{}
	for n, m := range assign(members, o.a.opts.Partitions) {
		if m == o.id {
			want[n] = true
		}
	}
	for _, p := range o.a.heldPartitions() {
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
		o.a.log.Info("partition reclaimed from this replica's previous run", "partition", n, "replica", o.id)
	}
	return rev, err
}

// acquire takes partition n if no replica holds it, and starts consuming it.
func (o *owner) acquire(ctx context.Context, n int) {
	o.a.mu.Lock()
	_, held := o.a.held[n]
	o.a.mu.Unlock()
	if held {
		return
	}
	sent := time.Now()
	rev, err := o.owners.Create(ctx, bus.PartitionKey(n), []byte(o.id))
	if errors.Is(err, jetstream.ErrKeyExists) && o.a.opts.ReplicaID != "" {
		rev, err = o.reclaim(ctx, n)
	}
	if err != nil {
		if !errors.Is(err, jetstream.ErrKeyExists) {
			o.a.log.Warn("acquire partition", "partition", n, "err", err)
		}
		return
	}
	consumer, err := topology.KeepConsuming(ctx, o.a.js, topology.ApplierConsumer(n),
		func(msg jetstream.Msg) { o.a.receive(o.holder.Hold(msg)) }, o.consumerLost)
	if err != nil {
		o.a.log.Error("consume partition", "partition", n, "err", err)
		_ = o.owners.Delete(ctx, bus.PartitionKey(n), jetstream.LastRevision(rev))
		return
	}
	p := newPartition(n, consumer, rev, sent)
	o.a.mu.Lock()
	o.a.held[n] = p
	o.a.mu.Unlock()
	o.a.log.Info("partition acquired", "partition", n, "replica", o.id)
}

// renew extends the hold on a partition, and makes sure its consumer exists
// and is consumed; losing the hold stops its consumption.
func (o *owner) renew(ctx context.Context, p *partition) {
	sent := time.Now()
	rev, err := o.owners.Update(ctx, bus.PartitionKey(p.n), []byte(o.id), p.rev)
	if err != nil {
		o.a.log.Error("partition lost", "partition", p.n, "err", err)
		p.end(fmt.Errorf("%w: renewal failed: %w", errHoldLost, err))
		o.stop(p)
		return
	}
	o.a.mu.Lock()
	p.rev = rev
	o.a.mu.Unlock()
	p.extend(sent)
	recreated, err := p.consumer.Check(ctx)
	switch {
	case err != nil:
		o.a.log.Warn("check the partition's consumer", "partition", p.n, "err", err)
	case recreated:
		o.a.log.Warn("the partition's consumer was gone or no longer consumed; consuming it again", "partition", p.n, "consumer", p.consumer.Consumer().Name())
	}
}

// release hands a partition over: stop consuming it, give its waiting
// replies back to the bus, wait for its applies in flight, delete its key.
func (o *owner) release(ctx context.Context, p *partition) {
	o.stop(p)
	if err := o.owners.Delete(ctx, bus.PartitionKey(p.n), jetstream.LastRevision(p.rev)); err != nil {
		o.a.log.Warn("release partition", "partition", p.n, "err", err)
	}
	o.a.log.Info("partition released", "partition", p.n, "replica", o.id)
}

func (o *owner) stop(p *partition) {
	o.a.mu.Lock()
	p.releasing = true
	delete(o.a.held, p.n)
	o.a.mu.Unlock()
	p.consumer.Drain()
	o.a.mu.Lock()
	for uid, b := range o.a.pending {
		if b.meta.Partition == p.n {
			delete(o.a.pending, uid)
			b.each(nak)
		}
	}
	o.a.mu.Unlock()
	p.active.Wait()
	p.end(fmt.Errorf("%w: released", errHoldLost))
}

// Consumers names the consumers of the partitions this replica holds: they
// must exist for it to be ready.
func (a *Applier) Consumers() []topology.Consumer {
	a.mu.Lock()
	defer a.mu.Unlock()
	cs := make([]topology.Consumer, 0, len(a.held))
	for _, p := range a.held {
		cs = append(cs, p.consumer.Consumer())
	}
	slices.SortFunc(cs, func(a, b topology.Consumer) int { return strings.Compare(a.Name(), b.Name()) })
	return cs
}

// newPartition is partition n, held through revision rev of its key,
// created or renewed at sent.
func newPartition(n int, consumer *topology.KeptConsumer, rev uint64, sent time.Time) *partition {
	p := &partition{n: n, consumer: consumer, rev: rev, fenced: map[types.UID]int64{}, deferred: map[types.UID]bool{}, rolling: map[types.UID]rolloutProgress{}}
	p.extend(sent)
	return p
}

// errHoldLost ends the applies of a partition this replica may no longer
// hold.
var errHoldLost = errors.New("the hold on the partition lapsed")

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

// begin marks an apply of partition n in flight, if this replica may apply
// it now, and returns the partition with its hold; end the apply with
// p.active.Done().
func (a *Applier) begin(n int) (*partition, context.Context, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	p := a.held[n]
	if p == nil || p.releasing {
		return nil, nil, false
	}
	p.mu.Lock()
	hold := p.hold
	p.mu.Unlock()
	if hold.Err() != nil {
		return nil, nil, false
	}
	p.active.Add(1)
	return p, hold, true
}
