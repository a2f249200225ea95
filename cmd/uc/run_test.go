package main

import (
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"universalcontroller.dev/uc/internal/bustest"
	"universalcontroller.dev/uc/schemas/bus"
)

// TestReadyConsumers: /readyz fails while a consumer a role needs is
// missing, and passes once it exists.
func TestReadyConsumers(t *testing.T) {
	js := bustest.JetStream(t)
	ctx := t.Context()
	needed := []string{bus.ApplierPartitionConsumer(3)}
	checks := readyChecks(config{roles: roleSet{applier: true}}, js.Conn(), js, nil,
		[]neededConsumers{{bus.ReplyStream, func() []string { return needed }}})
	consumers := func() error {
		for _, c := range checks {
			if c.name == "consumers" {
				return c.fn(ctx)
			}
		}
		t.Fatal("no consumers check")
		return nil
	}
	if err := consumers(); err == nil || !strings.Contains(err.Error(), needed[0]) {
		t.Fatalf("the check passed or does not name the missing consumer: %v", err)
	}
	if _, err := js.CreateOrUpdateConsumer(ctx, bus.ReplyStream, jetstream.ConsumerConfig{Durable: needed[0], AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
		t.Fatal(err)
	}
	if err := consumers(); err != nil {
		t.Fatalf("the consumer exists, the check says %v", err)
	}
}
