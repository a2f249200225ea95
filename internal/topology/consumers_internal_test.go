package topology

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// TestFixedAtCreationDiffers: EnsureConsumer replaces a consumer only for
// a change the server cannot make in place.
func TestFixedAtCreationDiffers(t *testing.T) {
	base := HookConsumer("c", "sync").Config
	start := time.Unix(1700000000, 0)
	for _, tc := range []struct {
		name   string
		change func(*jetstream.ConsumerConfig)
		want   bool
	}{
		{"same", func(*jetstream.ConsumerConfig) {}, false},
		{"ack wait, description, filter: updated in place", func(c *jetstream.ConsumerConfig) {
			c.AckWait, c.Description, c.FilterSubject = time.Minute, "other", "uc.req.c.>"
		}, false},
		{"state storage", func(c *jetstream.ConsumerConfig) { c.MemoryStorage = !c.MemoryStorage }, true},
		{"ack policy", func(c *jetstream.ConsumerConfig) { c.AckPolicy = jetstream.AckNonePolicy }, true},
		{"deliver policy", func(c *jetstream.ConsumerConfig) { c.DeliverPolicy = jetstream.DeliverNewPolicy }, true},
		{"replay policy", func(c *jetstream.ConsumerConfig) { c.ReplayPolicy = jetstream.ReplayOriginalPolicy }, true},
		{"start sequence", func(c *jetstream.ConsumerConfig) { c.OptStartSeq = 7 }, true},
		{"start time", func(c *jetstream.ConsumerConfig) { c.OptStartTime = &start }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base
			tc.change(&cfg)
			if got := fixedAtCreationDiffers(base, cfg); got != tc.want {
				t.Errorf("fixedAtCreationDiffers = %v, want %v", got, tc.want)
			}
		})
	}
}
