package watcher

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"universalcontroller.dev/uc/internal/natsauth"
	"universalcontroller.dev/uc/internal/topology"
	"universalcontroller.dev/uc/schemas/bus"
)

// TestCustomizeConsumersReplaceTheOtherKinds: as the watcher's NATS user,
// the one watcher takes the customize replies after sharded watchers,
// deleting their consumers of the installation's partitions, and a shard
// after the one watcher, deleting its consumer; each logs which it
// deleted.
func TestCustomizeConsumersReplaceTheOtherKinds(t *testing.T) {
	const partitions = bus.DefaultPartitions // those of natsauth's users
	for _, tt := range []struct {
		name string
		held []int
		left []topology.Consumer
	}{
		{"the one watcher, after shards", nil,
			[]topology.Consumer{topology.WatcherConsumerOf(0), topology.WatcherConsumerOf(7), topology.WatcherConsumerOf(partitions - 1)}},
		{"a shard, after the one watcher", []int{3, 5}, []topology.Consumer{topology.WatcherConsumer}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			js := busWithUsers(t)(natsauth.Watcher)
			ctx := t.Context()
			for _, c := range tt.left {
				if _, err := topology.EnsureConsumer(ctx, js, c); err != nil {
					t.Fatal(err)
				}
			}
			var logs bytes.Buffer
			w := &Watcher{js: js, opts: Options{Partitions: partitions, Held: tt.held}, log: slog.New(slog.NewTextHandler(&logs, nil))}
			for _, c := range w.consumers() {
				kept, err := w.consumeCustomizeReplies(ctx, ctx, c, bus.NewUnsettled(), nil)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(kept.Stop)
			}
			for _, c := range tt.left {
				if _, err := js.Consumer(ctx, c.Stream, c.Name()); !errors.Is(err, jetstream.ErrConsumerNotFound) {
					t.Errorf("consumer %s is still there: %v", c.Name(), err)
				}
				if !strings.Contains(logs.String(), c.Name()) {
					t.Errorf("the log does not name %s deleted:\n%s", c.Name(), logs.String())
				}
			}
			for _, c := range w.consumers() {
				if _, err := js.Consumer(ctx, c.Stream, c.Name()); err != nil {
					t.Errorf("consumer %s: %v", c.Name(), err)
				}
			}
		})
	}
}
