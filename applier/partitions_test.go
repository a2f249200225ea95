package applier

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/util/wait"

	"universalcontroller.dev/uc/internal/bustest"
	"universalcontroller.dev/uc/internal/shares"
	"universalcontroller.dev/uc/internal/topology"
	"universalcontroller.dev/uc/schemas/bus"
)

// consumerNames are the names of the consumers a needs now.
func consumerNames(a *Applier) []string {
	var names []string
	for _, c := range a.Consumers() {
		names = append(names, c.Name())
	}
	return names
}

// owning is an applier of partitions partitions on js, with its fence,
// sharing the partitions, the only replica, until the test ends.
func owning(t *testing.T, js jetstream.JetStream, partitions int) (*Applier, *shares.Shares) {
	t.Helper()
	a := New(nil, nil, js, nil, Options{Partitions: partitions}, slog.Default())
	var err error
	if a.rec.fence, err = newKVFence(t.Context(), js, 1); err != nil {
		t.Fatal(err)
	}
	s, _, err := newShares(t.Context(), js, a.in, a.opts, a.log)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Run(t.Context())
	}()
	t.Cleanup(func() { <-done })
	return a, s
}

// TestPartitionsKeepTheirConsumers: the consumer of a partition held, lost
// with a NATS restart or deleted, is created again and consumed, as are
// the applier's buckets.
func TestPartitionsKeepTheirConsumers(t *testing.T) {
	s, js := bustest.RestartableJetStream(t)
	ctx := t.Context()
	a, own := owning(t, js, 2)
	names := []string{topology.ApplierConsumer(0).Name(), topology.ApplierConsumer(1).Name()}
	kept := func() error {
		if got := consumerNames(a); !slices.Equal(got, names) {
			return fmt.Errorf("consumers %v, want %v", got, names)
		}
		var missing []string
		for _, n := range names {
			if _, err := js.Consumer(ctx, bus.ReplyStream, n); err != nil {
				missing = append(missing, n)
			}
		}
		for _, b := range topology.Applier(2).Creates.Buckets {
			if _, err := js.KeyValue(ctx, b.Name); err != nil {
				missing = append(missing, b.Name)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("missing %v", missing)
		}
		return nil
	}
	eventually(t, "after the first balance", kept)

	restarted := time.Now()
	s.Restart()
	if err := js.DeleteKeyValue(ctx, bus.FenceBucket); err != nil {
		t.Fatal(err)
	}
	own.Wake()
	eventually(t, "after the restart", kept)
	for _, n := range names {
		c, err := js.Consumer(ctx, bus.ReplyStream, n)
		if err != nil {
			t.Fatal(err)
		}
		if created := c.CachedInfo().Created; created.Before(restarted) {
			t.Errorf("consumer %s was created at %v, before the restart: the restart did not lose it", n, created)
		}
	}
}

// eventually waits for cond to hold, for a few leases at most.
func eventually(t *testing.T, what string, cond func() error) {
	t.Helper()
	var last error
	if wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 3*topology.LeaseTTL, true, func(context.Context) (bool, error) {
		last = cond()
		return last == nil, nil
	}) != nil {
		t.Fatalf("%s: %v", what, last)
	}
}
