// Package shares splits a role's partitions among its replicas, so that
// each partition is worked on by one replica at a time, even while
// ownership moves. The appliers share the partitions of the replies this
// way (topology.Appliers, topology.Partitions); a role's replicas bring a
// Holder, which does the role's work of the partitions their replica holds.
//
// Parents are spread over P partitions (bus.Partition). Every replica
// heartbeats in its role's membership bucket; the live replicas split the
// partitions by rendezvous hashing with bounded loads (assign), and a
// replica holds a partition through a key in its role's partition-keys
// bucket that it created and renews (both buckets expire keys after
// leaseTTL). A replica works, through its Holder, only on the partitions it
// holds. When a replica joins, the owners of the partitions it should get
// stop working on them (Holder.Give), and delete their keys; the newcomer
// then creates the keys. When a replica dies, its keys expire, and the
// other replicas take its partitions; a replica restarted with its id
// (Options.ReplicaID) takes its own back at once.
//
// The lease is short so that a dead replica's partitions move within
// seconds: renewed every 2 s, a key outlives three missed renewals.
package shares

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
	"universalcontroller.dev/uc/schemas/bus"
)

const (
	leaseTTL   = topology.LeaseTTL
	renewEvery = 2 * time.Second
	// A replica stops working on a partition it could not renew for this
	// long, well before its key can expire and another replica take it.
	staleAfter = leaseTTL - renewEvery
)

// A Holder does the work of the partitions its replica holds. Shares calls
// its methods from one goroutine, Run's, one at a time.
type Holder interface {
	// Take begins work on partition n, which this replica holds while hold
	// lasts (see Hold). An error gives n back: its key is deleted.
	Take(ctx context.Context, n int, hold *Hold) error
	// Renewed is called after each successful renewal of n's key.
	Renewed(ctx context.Context, n int)
	// Give ends work on n: when it returns, nothing of n is in flight. On a
	// release, the hold lasts while Give runs and ends after it; after a
	// failed renewal, it has already ended, so that the work in flight
	// stops rather than finishes.
	Give(n int)
}

// Options say what a Shares splits, and where.
type Options struct {
	// Partitions is the number of partitions split.
	Partitions int
	// Replicas of the buckets (1 on a single server).
	Replicas int
	// ReplicaID names this replica across its restarts: restarted with the
	// same id, it takes back the partitions it held at once instead of
	// waiting for their keys to expire. Two live replicas must never share
	// one. Empty: hostname_<random>, a new id for every run.
	ReplicaID string
	// Members is the membership bucket: a key per live replica, its
	// heartbeat. Keys is the partition-keys bucket: the key
	// bus.PartitionKey(n) of every partition held, valued with its
	// replica's id. Both expire their keys after topology.LeaseTTL.
	Members, Keys topology.Bucket
	// Kept are more buckets of the role that Run creates again, as it does
	// Members and Keys, when they are gone (the appliers' fence).
	Kept []topology.Bucket
	// Role names the replicas in log lines: "applier", "watcher".
	Role string
}

// Shares runs the ownership protocol for one replica of a role: it hands
// the partitions it acquires to its Holder, and takes them back.
type Shares struct {
	js            jetstream.JetStream
	h             Holder
	opts          Options
	log           *slog.Logger
	id            string
	members, keys jetstream.KeyValue
	// wake makes Run balance at once.
	wake chan struct{}
	// seen are the live replicas of the last balance (see live); only
	// Run's goroutine uses it.
	seen []string

	mu sync.Mutex
	// held are the partitions this replica holds; only Run's goroutine
	// changes it.
	held map[int]*Hold
}

// New is the Shares of one replica, handing its partitions to h, with
// opts.Members and opts.Keys created (or updated to their configuration).
// It holds nothing until Run.
func New(ctx context.Context, js jetstream.JetStream, h Holder, opts Options, log *slog.Logger) (*Shares, error) {
	id := opts.ReplicaID
	if id == "" {
		host, _ := os.Hostname()
		id = host + "_" + uuid.NewString()[:8]
	}
	s := &Shares{js: js, h: h, opts: opts, log: log, id: bus.Token(id), wake: make(chan struct{}, 1), held: map[int]*Hold{}}
	var err error
	bucketOpts := topology.Options{Replicas: opts.Replicas}
	if s.members, err = topology.EnsureBucket(ctx, js, opts.Members, bucketOpts); err != nil {
		return nil, err
	}
	if s.keys, err = topology.EnsureBucket(ctx, js, opts.Keys, bucketOpts); err != nil {
		return nil, err
	}
	return s, nil
}

// ID is this replica's id: its key in Members, the value of its keys in
// Keys.
func (s *Shares) ID() string { return s.id }

// Held are the partitions this replica holds, in order.
func (s *Shares) Held() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]int, 0, len(s.held))
	for n := range s.held {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Run balances partitions every renewEvery, and when woken, until ctx ends;
// then it leaves: its membership first, so that the other replicas take its
// partitions as soon as it releases them.
func (s *Shares) Run(ctx context.Context) {
	tick := time.NewTicker(renewEvery)
	defer tick.Stop()
	for {
		s.balance(ctx)
		select {
		case <-ctx.Done():
			leave, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if err := s.members.Delete(leave, s.id); err != nil {
				s.log.Warn("leave the "+s.opts.Role+"s", "replica", s.id, "err", err)
			}
			for _, n := range s.Held() {
				s.release(leave, n, s.hold(n))
			}
			cancel()
			return
		case <-tick.C:
		case <-s.wake:
		}
	}
}

// Wake makes Run balance now: the Holder found something amiss (a
// partition's consumer may be gone), which the renewals check.
func (s *Shares) Wake() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// hold is this replica's hold on partition n, or nil.
func (s *Shares) hold(n int) *Hold {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held[n]
}

// setHold records the hold on partition n, or its end (nil).
func (s *Shares) setHold(n int, h *Hold) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if h == nil {
		delete(s.held, n)
	} else {
		s.held[n] = h
	}
}

// checkBuckets creates again the role's buckets that are gone: a NATS
// server that lost its files, or an operator, may have removed them. The
// keys they held are lost: a replica whose partition key is gone stops
// working on the partition when its renewal fails, and takes it again.
func (s *Shares) checkBuckets(ctx context.Context) {
	for _, b := range append([]topology.Bucket{s.opts.Members, s.opts.Keys}, s.opts.Kept...) {
		_, err := s.js.KeyValue(ctx, b.Name)
		if err == nil {
			continue
		}
		if !errors.Is(err, jetstream.ErrBucketNotFound) {
			s.log.Warn("check bucket", "bucket", b.Name, "err", err)
			continue
		}
		if _, err := topology.EnsureBucket(ctx, s.js, b, topology.Options{Replicas: s.opts.Replicas}); err != nil {
			s.log.Error("create again a bucket that is gone", "bucket", b.Name, "err", err)
			continue
		}
		s.log.Warn("bucket was gone; created it again", "bucket", b.Name)
	}
}

// balance renews the partitions held, heartbeats, releases the partitions
// this replica should no longer hold, and tries to acquire those it
// should. The renewals come first, all at once (see renewAll). Acquiring
// stops after renewEvery, so that the next renewals come in time (a slow
// bus makes each acquisition slow); the rest waits for the next round.
func (s *Shares) balance(ctx context.Context) {
	deadline := time.Now().Add(renewEvery)
	s.renewAll(ctx)
	s.checkBuckets(ctx)
	if _, err := s.members.Put(ctx, s.id, nil); err != nil {
		s.log.Warn(s.opts.Role+" heartbeat", "err", err)
	}
	want := map[int]bool{}
	for n, m := range assign(s.live(ctx), s.opts.Partitions) {
		if m == s.id {
			want[n] = true
		}
	}
	for _, n := range s.Held() {
		if !want[n] {
			s.release(ctx, n, s.hold(n))
		}
	}
	for n := range want {
		if time.Now().After(deadline) {
			return
		}
		s.acquire(ctx, n)
	}
}

// live lists the live replicas: those whose heartbeat is in Members, and
// this one. A replica of the last view that the listing misses is read
// again, and stays if its heartbeat is there: nats.go lists a bucket's keys
// by watching it, and counts the initial values, so a key updated during
// the listing, while another is too, can be missed (with four replicas
// heartbeating every millisecond, one listing in 13 missed one). At 50,000
// parents, a watcher shard missing a live replica that way released the
// partitions a split without it does not give it, 25 times in 35 minutes,
// and took them back 2 s later, each time relisting its share. A failed
// listing reads again every replica of the last view.
func (s *Shares) live(ctx context.Context) []string {
	listed, err := s.members.Keys(ctx)
	if err != nil && !errors.Is(err, jetstream.ErrNoKeysFound) {
		s.log.Warn("list the "+s.opts.Role+"s", "err", err)
	}
	live := append(slices.Clone(listed), s.id)
	for _, m := range s.seen {
		if slices.Contains(live, m) {
			continue
		}
		if _, err := s.members.Get(ctx, m); err == nil || !errors.Is(err, jetstream.ErrKeyNotFound) {
			live = append(live, m)
		}
	}
	slices.Sort(live)
	s.seen = slices.Compact(live)
	return s.seen
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
func (s *Shares) reclaim(ctx context.Context, n int) (uint64, error) {
	e, err := s.keys.Get(ctx, bus.PartitionKey(n))
	if err != nil {
		return 0, err
	}
	if string(e.Value()) != s.id {
		return 0, jetstream.ErrKeyExists
	}
	rev, err := s.keys.Update(ctx, bus.PartitionKey(n), []byte(s.id), e.Revision())
	if err == nil {
		s.log.Info("partition reclaimed from this replica's previous run", "partition", n, "replica", s.id)
	}
	return rev, err
}

// acquire takes partition n if no replica holds it, and hands it to the
// Holder.
func (s *Shares) acquire(ctx context.Context, n int) {
	if s.hold(n) != nil {
		return
	}
	sent := time.Now()
	rev, err := s.keys.Create(ctx, bus.PartitionKey(n), []byte(s.id))
	if errors.Is(err, jetstream.ErrKeyExists) && s.opts.ReplicaID != "" {
		rev, err = s.reclaim(ctx, n)
	}
	if err != nil {
		if !errors.Is(err, jetstream.ErrKeyExists) {
			s.log.Warn("acquire partition", "partition", n, "err", err)
		}
		return
	}
	h := NewHold(sent)
	h.rev = rev
	if err := s.h.Take(ctx, n, h); err != nil {
		s.log.Error("take partition", "partition", n, "err", err)
		h.end(fmt.Errorf("%w: not taken", ErrHoldLost))
		_ = s.keys.Delete(ctx, bus.PartitionKey(n), jetstream.LastRevision(rev))
		return
	}
	s.setHold(n, h)
	s.log.Info("partition acquired", "partition", n, "replica", s.id)
}

// renewal is the answer to the renewal of one partition's key.
type renewal struct {
	sent time.Time
	rev  uint64
	err  error
}

// renewAll renews the keys of every partition held, all at once, then
// hands each answer to renewed. One at a time, a round took one round
// trip of the bus per partition: at 50,000 parents, with the bus busy with
// a burst's hook requests, the keys of the last partitions expired before
// their turn came, and `uc run` lost and took again its own partitions 422
// times in 28 minutes, each time stopping the applies in flight.
func (s *Shares) renewAll(ctx context.Context) {
	held := s.Held()
	answers := make([]renewal, len(held))
	var wg sync.WaitGroup
	for i, n := range held {
		rev := s.hold(n).rev
		wg.Go(func() {
			sent := time.Now()
			rev, err := s.keys.Update(ctx, bus.PartitionKey(n), []byte(s.id), rev)
			answers[i] = renewal{sent: sent, rev: rev, err: err}
		})
	}
	wg.Wait()
	for i, n := range held {
		s.renewed(ctx, n, s.hold(n), answers[i])
	}
}

// renewed extends the hold on a partition whose key was renewed; a failed
// renewal ends the hold, and the work on the partition.
func (s *Shares) renewed(ctx context.Context, n int, h *Hold, r renewal) {
	if r.err != nil {
		s.log.Error("partition lost", "partition", n, "err", r.err)
		h.end(fmt.Errorf("%w: renewal failed: %w", ErrHoldLost, r.err))
		s.stop(n, h)
		return
	}
	h.rev = r.rev
	h.extend(r.sent)
	s.h.Renewed(ctx, n)
}

// release hands a partition over: end the work on it, delete its key.
func (s *Shares) release(ctx context.Context, n int, h *Hold) {
	s.stop(n, h)
	if err := s.keys.Delete(ctx, bus.PartitionKey(n), jetstream.LastRevision(h.rev)); err != nil {
		s.log.Warn("release partition", "partition", n, "err", err)
	}
	s.log.Info("partition released", "partition", n, "replica", s.id)
}

// stop ends the work on a partition, then its hold.
func (s *Shares) stop(n int, h *Hold) {
	s.h.Give(n)
	h.end(fmt.Errorf("%w: released", ErrHoldLost))
	s.setHold(n, nil)
}
