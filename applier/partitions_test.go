package applier

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"universalcontroller.dev/uc/internal/bustest"
	"universalcontroller.dev/uc/internal/topology"
	"universalcontroller.dev/uc/schemas/bus"
)

// TestAssign: every partition has one owner, every member holds its share
// (the floor or the ceiling of partitions / members), the result does not
// depend on the order members are listed in, and a member joining takes
// about its share, moving few partitions between the others.
func TestAssign(t *testing.T) {
	for _, tc := range []struct {
		members, partitions int
		// maxOther bounds the partitions that move between old members
		// when the last member joins (2000 random trials: at most 4, 6, 5
		// with 3, 4, 5 members and 32 partitions).
		maxOther int
	}{
		{1, 32, 0},
		{2, 32, 0},
		{3, 32, 6},
		{4, 32, 6},
		{5, 32, 6},
		{3, 8, 3},
		{40, 32, 2}, // more members than partitions: some hold none
	} {
		t.Run(fmt.Sprintf("%d members %d partitions", tc.members, tc.partitions), func(t *testing.T) {
			for trial := range 50 {
				members := make([]string, tc.members)
				for i := range members {
					members[i] = fmt.Sprintf("uc-applier-%d_%08x", trial, uint32(trial*7919+i*104729))
				}
				got := assign(members, tc.partitions)
				if len(got) != tc.partitions {
					t.Fatalf("%d of %d partitions assigned: %v", len(got), tc.partitions, got)
				}
				held := map[string]int{}
				for _, m := range got {
					held[m]++
				}
				lo, hi := tc.partitions/tc.members, (tc.partitions+tc.members-1)/tc.members
				for _, m := range members {
					if held[m] < lo || held[m] > hi {
						t.Fatalf("%s holds %d partitions, want %d to %d: %v", m, held[m], lo, hi, held)
					}
				}
				reversed := make([]string, len(members))
				for i, m := range members {
					reversed[len(members)-1-i] = m
				}
				for n, m := range assign(reversed, tc.partitions) {
					if got[n] != m {
						t.Fatalf("partition %d goes to %s or %s depending on the members' order", n, got[n], m)
					}
				}
				before := assign(members[:len(members)-1], tc.partitions)
				other := 0
				for n, m := range got {
					if before[n] != "" && before[n] != m && m != members[len(members)-1] {
						other++
					}
				}
				if other > tc.maxOther {
					t.Fatalf("a member joining moved %d partitions between the others, want at most %d", other, tc.maxOther)
				}
			}
		})
	}
}

// consumerNames are the names of the consumers a needs now.
func consumerNames(a *Applier) []string {
	var names []string
	for _, c := range a.Consumers() {
		names = append(names, c.Name())
	}
	return names
}

// owning is an applier of partitions partitions on js, with its fence, and
// its ownership protocol, not yet run.
func owning(t *testing.T, js jetstream.JetStream, partitions int) (*Applier, *owner) {
	t.Helper()
	a := New(nil, nil, js, nil, Options{Partitions: partitions}, slog.Default())
	var err error
	if a.rec.fence, err = newKVFence(t.Context(), js, 1); err != nil {
		t.Fatal(err)
	}
	o, err := newOwner(t.Context(), js, a.in, a.opts, a.log)
	if err != nil {
		t.Fatal(err)
	}
	return a, o
}

// TestPartitionsKeepTheirConsumers: the consumer of a partition held, lost
// with a NATS restart or deleted, is created again and consumed by the next
// balance, as are the applier's buckets.
func TestPartitionsKeepTheirConsumers(t *testing.T) {
	s, js := bustest.RestartableJetStream(t)
	ctx := t.Context()
	a, o := owning(t, js, 2)
	o.balance(ctx)
	names := []string{topology.ApplierConsumer(0).Name(), topology.ApplierConsumer(1).Name()}
	if got := consumerNames(a); !slices.Equal(got, names) {
		t.Fatalf("consumers %v, want %v", got, names)
	}
	missing := func() []string {
		var out []string
		for _, n := range names {
			if _, err := js.Consumer(ctx, bus.ReplyStream, n); err != nil {
				out = append(out, n)
			}
		}
		for _, b := range topology.Applier(2).Creates.Buckets {
			if _, err := js.KeyValue(ctx, b.Name); err != nil {
				out = append(out, b.Name)
			}
		}
		return out
	}
	if m := missing(); len(m) > 0 {
		t.Fatalf("missing after the first balance: %v", m)
	}

	s.Restart()
	if err := js.DeleteKeyValue(ctx, bus.FenceBucket); err != nil {
		t.Fatal(err)
	}
	if m := missing(); len(m) != len(names)+1 {
		t.Fatalf("missing after the restart: %v; want both consumers and the fence", m)
	}
	o.balance(ctx)
	if m := missing(); len(m) > 0 {
		t.Errorf("missing after a balance: %v", m)
	}
	if got := consumerNames(a); !slices.Equal(got, names) {
		t.Errorf("consumers %v, want %v", got, names)
	}
}

// TestHoldLapses: a replica may apply a partition only while its hold is
// current. Not renewed for staleAfter — a replica cut off from NATS — the
// hold ends, before the key can expire and another replica take the
// partition, and with it the applies in flight; a renewal afterwards
// starts a new hold. A renewal that fails — another replica has the key —
// ends the hold at once.
func TestHoldLapses(t *testing.T) {
	ctx := t.Context()
	a, o := owning(t, bustest.JetStream(t), 1)
	held := func() context.Context {
		t.Helper()
		p, hold, ok := a.in.begin(0)
		if !ok {
			t.Fatal("the replica may not apply the partition it holds")
		}
		p.active.Done()
		return hold
	}
	renewed := time.Now()
	o.balance(ctx)
	applying, cancel := whileHeld(ctx, held())
	defer cancel()

	// No balance: the key is not renewed.
	select {
	case <-applying.Done():
	case <-time.After(leaseTTL):
		t.Fatalf("an apply still runs %s after the last renewal, when another replica may hold the partition", leaseTTL)
	}
	if since := time.Since(renewed); since < staleAfter-time.Second {
		t.Errorf("the hold lapsed %s after its renewal, want about %s", since, staleAfter)
	}
	if cause := context.Cause(applying); !errors.Is(cause, errHoldLost) {
		t.Errorf("the apply ended with %v, want the hold's lapse", cause)
	}
	if _, _, ok := a.in.begin(0); ok {
		t.Error("an apply began after the hold lapsed")
	}

	o.balance(ctx)
	p, hold, ok := a.in.begin(0)
	if !ok {
		t.Fatal("the replica may not apply the partition after renewing its hold")
	}
	// An apply in flight, until its context ends.
	applying, cancel = whileHeld(ctx, hold)
	defer cancel()
	go func() {
		<-applying.Done()
		p.active.Done()
	}()

	// Another replica has the key: the renewal fails, and the replica
	// stops the apply rather than wait for it to end (balance returns).
	if err := o.owners.Delete(ctx, bus.PartitionKey(0)); err != nil {
		t.Fatal(err)
	}
	if _, err := o.owners.Create(ctx, bus.PartitionKey(0), []byte("other")); err != nil {
		t.Fatal(err)
	}
	o.balance(ctx)
	if cause := context.Cause(applying); !errors.Is(cause, errHoldLost) || !strings.Contains(cause.Error(), "renewal failed") {
		t.Errorf("after a failed renewal the apply ended with %v, want the failed renewal", cause)
	}
	if _, _, ok := a.in.begin(0); ok {
		t.Error("an apply began after the renewal failed")
	}
}
