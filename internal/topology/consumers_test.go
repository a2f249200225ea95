package topology_test

import (
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"universalcontroller.dev/uc/internal/bustest"
	"universalcontroller.dev/uc/internal/topology"
	"universalcontroller.dev/uc/schemas/bus"
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
