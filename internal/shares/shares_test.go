package shares

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/util/wait"

	"universalcontroller.dev/uc/internal/bustest"
	"universalcontroller.dev/uc/internal/topology"
	"universalcontroller.dev/uc/schemas/bus"
)

// fakeHolder records what its Shares hands it.
type fakeHolder struct {
	id   string             // its replica's
	keys jetstream.KeyValue // the partition keys
	fail int                // the partition whose Take fails, or -1

	mu       sync.Mutex
	holds    map[int]*Hold // taken, not given
	taken    map[int]int
	renewals map[int]int
	given    []int
	// ownKey and ended tell, for each partition given, whether its key
	// still named this replica and whether its hold had ended when Give
	// was called.
	ownKey, ended map[int]bool
}

func (f *fakeHolder) Take(_ context.Context, n int, hold *Hold) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if n == f.fail {
		f.holds[n] = hold // to see it end
		return errors.New("cannot take it")
	}
	f.holds[n] = hold
	f.taken[n]++
	return nil
}

func (f *fakeHolder) Renewed(_ context.Context, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.renewals[n]++
}

func (f *fakeHolder) Give(n int) {
	e, err := f.keys.Get(context.Background(), bus.PartitionKey(n))
	f.mu.Lock()
	defer f.mu.Unlock()
	f.given = append(f.given, n)
	f.ownKey[n] = err == nil && string(e.Value()) == f.id
	f.ended[n] = f.holds[n].Err() != nil
	delete(f.holds, n)
}

// holding are the partitions taken and not given.
func (f *fakeHolder) holding() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Sorted(maps.Keys(f.holds))
}

// hold is the hold on partition n that Take was handed last.
func (f *fakeHolder) hold(n int) *Hold {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.holds[n]
}

// replica is a replica with id ("" for a new one) sharing partitions
// partitions on js, and its Holder.
func replica(t *testing.T, js jetstream.JetStream, id string, partitions int) (*Shares, *fakeHolder) {
	t.Helper()
	f := &fakeHolder{fail: -1, holds: map[int]*Hold{}, taken: map[int]int{}, renewals: map[int]int{}, ownKey: map[int]bool{}, ended: map[int]bool{}}
	s, err := New(t.Context(), js, f, Options{
		Partitions: partitions, ReplicaID: id,
		Members: topology.Appliers, Keys: topology.Partitions, Kept: []topology.Bucket{topology.Fence},
		Role: "test",
	}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	f.id, f.keys = s.ID(), s.keys
	return s, f
}

// run runs s until the stop it returns, or the test's end.
func run(t *testing.T, s *Shares) (stop func()) {
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Run(ctx)
	}()
	stop = func() {
		cancel()
		<-done
	}
	t.Cleanup(stop)
	return stop
}

// eventually waits for cond to hold, until within.
func eventually(t *testing.T, within time.Duration, what string, cond func() error) {
	t.Helper()
	var last error
	if wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, within, true, func(context.Context) (bool, error) {
		last = cond()
		return last == nil, nil
	}) != nil {
		t.Fatalf("%s within %s: %v", what, within, last)
	}
}

// TestReplicasSplitAndTakeOver: two replicas split the partitions evenly,
// as assign does, each handing its own to its Holder. When one stops, it
// gives each of its partitions back before it deletes the key, and the
// other takes them all within a few renewals.
func TestReplicasSplitAndTakeOver(t *testing.T) {
	js := bustest.JetStream(t)
	a, fa := replica(t, js, "a", 8)
	b, fb := replica(t, js, "b", 8)
	stopA := run(t, a)
	run(t, b)
	want := map[string][]int{}
	for n, m := range assign([]string{"a", "b"}, 8) {
		want[m] = append(want[m], n)
	}
	for _, ns := range want {
		slices.Sort(ns)
	}
	eventually(t, 3*leaseTTL, "an even split", func() error {
		if ha, hb := a.Held(), b.Held(); !slices.Equal(ha, want["a"]) || !slices.Equal(hb, want["b"]) {
			return fmt.Errorf("a holds %v, b %v; want %v", ha, hb, want)
		}
		if ha, hb := fa.holding(), fb.holding(); !slices.Equal(ha, want["a"]) || !slices.Equal(hb, want["b"]) {
			return fmt.Errorf("a's holder holds %v, b's %v; want %v", ha, hb, want)
		}
		return nil
	})
	if len(want["a"]) != 4 {
		t.Fatalf("assign gives a %v of 8 partitions, want 4", want["a"])
	}

	stopA()
	if held, holding := a.Held(), fa.holding(); len(held) > 0 || len(holding) > 0 {
		t.Errorf("a stopped holding %v, its holder %v", held, holding)
	}
	fa.mu.Lock()
	for _, n := range want["a"] {
		if !slices.Contains(fa.given, n) || !fa.ownKey[n] || fa.ended[n] {
			t.Errorf("a stopped: partition %d given back: %v, with its key: %v, its hold ended: %v; want given back, with its key, the hold still on",
				n, slices.Contains(fa.given, n), fa.ownKey[n], fa.ended[n])
		}
	}
	fa.mu.Unlock()
	all := []int{0, 1, 2, 3, 4, 5, 6, 7}
	eventually(t, 3*renewEvery, "b takes every partition", func() error {
		if held, holding := b.Held(), fb.holding(); !slices.Equal(held, all) || !slices.Equal(holding, all) {
			return fmt.Errorf("b holds %v, its holder %v", held, holding)
		}
		return nil
	})
}

// TestHoldEnds: a replica may work on a partition only while its hold is
// current. Not renewed for staleAfter — a replica cut off from NATS — the
// hold ends, before the key can expire and another replica take the
// partition, and with it the work in flight; a renewal afterwards starts
// a new hold. A renewal that fails — another replica has the key — ends
// the hold at once, before the Holder is asked to give the partition
// back.
func TestHoldEnds(t *testing.T) {
	ctx := t.Context()
	s, f := replica(t, bustest.JetStream(t), "", 1)
	renewed := time.Now()
	s.balance(ctx)
	hold := f.hold(0)
	if hold == nil || hold.Err() != nil {
		t.Fatal("the partition is not held")
	}
	working, cancel := hold.WhileHeld(ctx)
	defer cancel()

	// No balance: the key is not renewed.
	select {
	case <-working.Done():
	case <-time.After(leaseTTL):
		t.Fatalf("work still goes on %s after the last renewal, when another replica may hold the partition", leaseTTL)
	}
	if since := time.Since(renewed); since < staleAfter-time.Second {
		t.Errorf("the hold lapsed %s after its renewal, want about %s", since, staleAfter)
	}
	if cause := context.Cause(working); !errors.Is(cause, ErrHoldLost) {
		t.Errorf("the work ended with %v, want the hold's lapse", cause)
	}
	if hold.Err() == nil || hold.Check() == nil {
		t.Error("the hold lasts after it lapsed")
	}

	s.balance(ctx)
	if err := hold.Err(); err != nil {
		t.Fatalf("after a renewal, the hold: %v", err)
	}
	if f.renewals[0] != 1 || f.taken[0] != 1 {
		t.Errorf("renewed %d times, taken %d times; want a renewal of the partition taken once", f.renewals[0], f.taken[0])
	}
	working, cancel = hold.WhileHeld(ctx)
	defer cancel()

	// Another replica has the key.
	if err := s.keys.Delete(ctx, bus.PartitionKey(0)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.keys.Create(ctx, bus.PartitionKey(0), []byte("other")); err != nil {
		t.Fatal(err)
	}
	s.balance(ctx)
	if cause := context.Cause(working); !errors.Is(cause, ErrHoldLost) || !strings.Contains(cause.Error(), "renewal failed") {
		t.Errorf("after a failed renewal the work ended with %v, want the failed renewal", cause)
	}
	if !slices.Equal(f.given, []int{0}) || !f.ended[0] || len(s.Held()) > 0 {
		t.Errorf("after a failed renewal: given back %v (the hold ended before: %v), held %v; want given back after the hold ended",
			f.given, f.ended[0], s.Held())
	}
}

// TestTakeFails: a partition the Holder fails to take is given back: its
// key deleted, its hold ended; the others are held.
func TestTakeFails(t *testing.T) {
	ctx := t.Context()
	s, f := replica(t, bustest.JetStream(t), "", 2)
	f.fail = 1
	s.balance(ctx)
	if held := s.Held(); !slices.Equal(held, []int{0}) {
		t.Errorf("held %v, want [0]", held)
	}
	if _, err := s.keys.Get(ctx, bus.PartitionKey(1)); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("the key of the partition not taken: %v, want it deleted", err)
	}
	if f.hold(1).Err() == nil {
		t.Error("the hold on the partition not taken lasts")
	}
}

// TestBucketsCreatedAgain: the role's buckets, gone, are created again by
// the next balance, which takes the partitions again: their keys were lost
// with them.
func TestBucketsCreatedAgain(t *testing.T) {
	ctx := t.Context()
	js := bustest.JetStream(t)
	s, f := replica(t, js, "", 2)
	s.balance(ctx)
	if _, err := topology.EnsureBucket(ctx, js, topology.Fence, topology.Options{}); err != nil {
		t.Fatal(err)
	}
	buckets := []topology.Bucket{topology.Appliers, topology.Partitions, topology.Fence}
	for _, b := range buckets {
		if err := js.DeleteKeyValue(ctx, b.Name); err != nil {
			t.Fatal(err)
		}
	}
	s.balance(ctx)
	for _, b := range buckets {
		if _, err := js.KeyValue(ctx, b.Name); err != nil {
			t.Errorf("bucket %s: %v", b.Name, err)
		}
	}
	if held := s.Held(); !slices.Equal(held, []int{0, 1}) || f.taken[0] != 2 || f.taken[1] != 2 {
		t.Errorf("held %v, taken %v times; want both, each taken again", held, f.taken)
	}
}

// TestReplicaReclaims: a replica restarted with its id takes back at once
// the partitions its previous run held, whose keys have not expired.
func TestReplicaReclaims(t *testing.T) {
	ctx := t.Context()
	js := bustest.JetStream(t)
	before, _ := replica(t, js, "r", 4)
	before.balance(ctx)
	after, f := replica(t, js, "r", 4)
	after.balance(ctx)
	if held := after.Held(); !slices.Equal(held, []int{0, 1, 2, 3}) || len(f.holding()) != 4 {
		t.Errorf("the restarted replica holds %v, its holder %v; want every partition", held, f.holding())
	}
}

// slowKeys is a partition-keys bucket whose renewals (Update) each wait
// until want of them are in flight at once, or fail after a while: a bus
// slow enough that renewing one key after another lets the last ones
// expire.
type slowKeys struct {
	jetstream.KeyValue
	want    int
	mu      sync.Mutex
	waiting int
	all     chan struct{} // closed once want renewals are in flight
}

func (k *slowKeys) Update(ctx context.Context, key string, value []byte, last uint64) (uint64, error) {
	k.mu.Lock()
	if k.waiting++; k.waiting == k.want {
		close(k.all)
	}
	k.mu.Unlock()
	select {
	case <-k.all:
		return k.KeyValue.Update(ctx, key, value, last)
	case <-time.After(2 * time.Second):
		return 0, errors.New("renewed one at a time: the bus took too long")
	}
}

// TestRenewalsAtOnce: a replica renews the keys of all its partitions at
// once, not one round trip after another, so that on a slow bus the last
// key does not expire before its turn.
func TestRenewalsAtOnce(t *testing.T) {
	ctx := t.Context()
	const partitions = 8
	s, f := replica(t, bustest.JetStream(t), "", partitions)
	s.balance(ctx)
	if held := s.Held(); len(held) != partitions {
		t.Fatalf("held %v, want all %d partitions", held, partitions)
	}
	s.keys = &slowKeys{KeyValue: s.keys, want: partitions, all: make(chan struct{})}
	s.balance(ctx)
	if held := s.Held(); len(held) != partitions || len(f.given) > 0 {
		t.Fatalf("after a round of renewals on a slow bus: held %v, given back %v; want all %d still held", held, f.given, partitions)
	}
	for n := range partitions {
		if f.renewals[n] != 1 {
			t.Errorf("partition %d renewed %d times, want once", n, f.renewals[n])
		}
	}
}

// hidingKeys is a membership bucket whose listing misses one key, as
// nats.go's can miss a key updated while it lists, or fails.
type hidingKeys struct {
	jetstream.KeyValue
	hide string
	fail bool
}

func (k *hidingKeys) Keys(ctx context.Context, opts ...jetstream.WatchOpt) ([]string, error) {
	if k.fail {
		return nil, errors.New("listing timed out")
	}
	keys, err := k.KeyValue.Keys(ctx, opts...)
	return slices.DeleteFunc(keys, func(key string) bool { return key == k.hide }), err
}

// TestListingMissesAReplica: a live replica missing from one listing of
// the members keeps its place in the split: the others neither release
// partitions for a split without it nor take its own; a listing that
// fails reads the last view again. Gone for good (its
// heartbeat deleted, as when it stops), it leaves the split. The replicas
// and the one missed are those of a 4-shard bench run where watcher-2,
// missing watcher-1 at times, released 4 partitions 25 times.
func TestListingMissesAReplica(t *testing.T) {
	ctx := t.Context()
	js := bustest.JetStream(t)
	const partitions = 32
	ids := []string{"watcher-1", "watcher-2", "watcher-3", "watcher-4"}
	var replicas []*Shares
	var holder *fakeHolder
	for _, id := range ids {
		s, f := replica(t, js, id, partitions)
		replicas = append(replicas, s)
		if id == "watcher-2" {
			holder = f
		}
	}
	// Releases, then acquisitions: a few rounds settle the split.
	for range 3 {
		for _, s := range replicas {
			s.balance(ctx)
		}
	}
	s := replicas[1]
	var held, moved []int
	without := assign(slices.Delete(slices.Clone(ids), 0, 1), partitions)
	for n, m := range assign(ids, partitions) {
		if m == s.ID() {
			held = append(held, n)
			if without[n] != m {
				moved = append(moved, n)
			}
		}
	}
	slices.Sort(held)
	if got := s.Held(); !slices.Equal(got, held) {
		t.Fatalf("%s holds %v, want %v", s.ID(), got, held)
	}
	if len(moved) == 0 {
		t.Fatalf("a split without watcher-1 takes nothing of %s's %v: the test cannot tell", s.ID(), held)
	}

	hiding := &hidingKeys{KeyValue: s.members, hide: "watcher-1"}
	s.members = hiding
	s.balance(ctx)
	if got := s.Held(); !slices.Equal(got, held) || len(holder.given) > 0 {
		t.Errorf("watcher-1 missing from one listing: %s holds %v, gave back %v; want %v still held",
			s.ID(), got, holder.given, held)
	}

	// The listing fails while watcher-1's partitions are free (their keys
	// lost): the last view still gives them to watcher-1.
	for n, m := range assign(ids, partitions) {
		if m == "watcher-1" {
			if err := s.keys.Delete(ctx, bus.PartitionKey(n)); err != nil {
				t.Fatal(err)
			}
		}
	}
	hiding.fail = true
	s.balance(ctx)
	if got := s.Held(); !slices.Equal(got, held) {
		t.Errorf("the listing failed: %s holds %v; want %v, the last view's share", s.ID(), got, held)
	}
	hiding.fail = false

	// watcher-1 stops: its heartbeat is deleted.
	if err := s.members.Delete(ctx, "watcher-1"); err != nil {
		t.Fatal(err)
	}
	s.balance(ctx)
	for _, n := range moved {
		if s.hold(n) != nil {
			t.Errorf("watcher-1 gone: %s still holds partition %d, which a split without it gives %s", s.ID(), n, without[n])
		}
	}
}
