package topology_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"universalcontroller.dev/uc/internal/bustest"
	"universalcontroller.dev/uc/internal/topology"
	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
)

// TestEnsureConsumerReplacesFileState: a consumer an older uc made with its
// state in files is replaced by one with its state in memory, and the
// requests it had not acknowledged are still there for the new one.
func TestEnsureConsumerReplacesFileState(t *testing.T) {
	js := bustest.JetStream(t)
	ctx := t.Context()
	cfg := jetstream.ConsumerConfig{Durable: "old", FilterSubject: bus.RequestPrefix + ".c.>", AckPolicy: jetstream.AckExplicitPolicy}
	if _, err := js.CreateOrUpdateConsumer(ctx, bus.RequestStream, cfg); err != nil {
		t.Fatal(err)
	}
	for _, uid := range []string{"a", "b", "c"} {
		if _, err := js.Publish(ctx, bus.RequestPrefix+".c.sync.0."+uid, []byte(uid)); err != nil {
			t.Fatal(err)
		}
	}
	cfg.MemoryStorage = topology.ConsumerStateInMemory
	if _, err := js.CreateOrUpdateConsumer(ctx, bus.RequestStream, cfg); err == nil {
		t.Fatal("the server updated the consumer's storage in place; EnsureConsumer need not replace it")
	}
	c, err := topology.EnsureConsumer(ctx, js, topology.Consumer{Stream: bus.RequestStream, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !info.Config.MemoryStorage || info.NumPending != 3 {
		t.Fatalf("consumer in memory %v with %d pending, want true with 3", info.Config.MemoryStorage, info.NumPending)
	}
}

// TestWatcherConsumersSplitTheCustomizeReplies: a parent's customize reply
// waits on the sharded watchers' consumer of its partition, and on no
// other partition's nor on an applier's, beside which the watchers'
// consumers may exist on the work queue.
func TestWatcherConsumersSplitTheCustomizeReplies(t *testing.T) {
	js := bustest.JetStream(t)
	ctx := t.Context()
	const partitions = 3
	var cs []topology.Consumer
	for n := range partitions {
		cs = append(cs, topology.WatcherConsumerOf(n), topology.ApplierConsumer(n))
	}
	for _, c := range cs {
		if _, err := topology.EnsureConsumer(ctx, js, c); err != nil {
			t.Fatal(err)
		}
	}
	a := bus.Address{Controller: "c.x", Hook: hooks.Customize, Partition: 1, ParentUID: "u"}
	if _, err := js.Publish(ctx, a.ReplySubject(), []byte("{}")); err != nil {
		t.Fatal(err)
	}
	// A consumer's count of pending messages may lag the publish's ack a
	// little: the counts are read until they are right, or 10 s.
	var wrong []string
	for deadline := time.Now().Add(10 * time.Second); ; {
		wrong = nil
		for _, c := range cs {
			cons, err := js.Consumer(ctx, bus.ReplyStream, c.Name())
			if err != nil {
				t.Fatal(err)
			}
			want := uint64(0)
			if c.Name() == topology.WatcherConsumerOf(1).Name() {
				want = 1
			}
			if got := cons.CachedInfo().NumPending; got != want {
				wrong = append(wrong, fmt.Sprintf("%s has %d replies pending, want %d", c.Name(), got, want))
			}
		}
		if len(wrong) == 0 || time.Now().After(deadline) {
			break
		}
	}
	for _, w := range wrong {
		t.Error(w)
	}
}
