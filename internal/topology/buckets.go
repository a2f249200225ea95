package topology

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"universalcontroller.dev/uc/schemas/bus"
)

// Bucket is one of uc's JetStream key-value buckets. Each is on files.
type Bucket struct {
	Name   string
	config jetstream.KeyValueConfig
}

// Config is the bucket's configuration on servers of opts.
func (b Bucket) Config(opts Options) jetstream.KeyValueConfig {
	cfg := b.config
	cfg.Bucket, cfg.Storage, cfg.Replicas = b.Name, jetstream.FileStorage, opts.replicas()
	return cfg
}

// Stream is the stream that holds the bucket.
func (b Bucket) Stream() string { return "KV_" + b.Name }

// LeaseTTL is how long a key of the ownership buckets (Appliers,
// Partitions, Watchers, WatcherPartitions) lives unless renewed: a dead
// replica's membership and partitions are gone after it.
const LeaseTTL = 8 * time.Second

// The buckets: Fence, Appliers and Partitions, each created by the
// appliers; Watchers and WatcherPartitions by the watchers when they share
// the partitions (ShardedWatcher).
var (
	// Fence remembers, per parent, the last reply applied (a bus.Fence).
	Fence = Bucket{Name: bus.FenceBucket, config: jetstream.KeyValueConfig{
		Description: "per parent UID: the observation, request and parent generation and resourceVersion of the last hook reply applied",
	}}
	// Appliers holds a key per live applier replica, its heartbeat.
	Appliers = Bucket{Name: bus.AppliersBucket, config: jetstream.KeyValueConfig{TTL: LeaseTTL}}
	// Partitions holds the key of every partition an applier replica holds
	// (bus.PartitionKey), valued with the replica's id.
	Partitions = Bucket{Name: bus.PartitionsBucket, config: jetstream.KeyValueConfig{TTL: LeaseTTL}}
	// Watchers holds a key per live watcher replica, its heartbeat.
	Watchers = Bucket{Name: bus.WatchersBucket, config: jetstream.KeyValueConfig{TTL: LeaseTTL}}
	// WatcherPartitions holds the key of every partition a watcher replica
	// holds (bus.PartitionKey), valued with the replica's id.
	WatcherPartitions = Bucket{Name: bus.WatcherPartitionsBucket, config: jetstream.KeyValueConfig{TTL: LeaseTTL}}
)

// EnsureBucket creates the bucket, or updates it to its configuration.
func EnsureBucket(ctx context.Context, js jetstream.JetStream, b Bucket, opts Options) (jetstream.KeyValue, error) {
	kv, err := js.CreateOrUpdateKeyValue(ctx, b.Config(opts))
	if err != nil {
		return nil, fmt.Errorf("bucket %s: %w", b.Name, err)
	}
	return kv, nil
}
