package topology

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
)

// Consumer is a durable consumer of one of the streams: its stream and
// configuration. In a Role, a Consumer without a name stands for every
// consumer of its stream.
type Consumer struct {
	Stream string
	Config jetstream.ConsumerConfig
}

// Name is the consumer's durable name.
func (c Consumer) Name() string { return c.Config.Durable }

// EveryConsumer stands, in a Role, for every consumer of the stream.
func EveryConsumer(s Stream) Consumer { return Consumer{Stream: s.Name} }

// ConsumerStateInMemory: the bus's consumers keep their state (what was
// delivered and acknowledged) in memory, not in files. Their streams are
// work queues: a message leaves the stream when it is acknowledged, so a
// consumer whose state is lost with its server starts again from the
// messages still in the stream — every one not yet acknowledged, each
// delivered again, and applying is idempotent. A server restarted on its
// files comes back without these consumers: every role checks the ones it
// needs and creates them again (KeptConsumer, HookConsumers). With file
// state, the server writes each consumer's state up to 10 times a second:
// 40–90 % more CPU per reply with 32 partition consumers
// (BenchmarkConsumerState), a tenth of uc's CPU in the benchmark's create
// phase.
const ConsumerStateInMemory = true

// HookConsumer is the durable consumer shared by the workers of one
// controller's hook (bus.HookConsumer names it). Its ack wait is short
// (bus.AckWait): the requests a dead worker held go to the others within
// seconds, and a worker keeps those it serves or queues with in-progress
// acks.
func HookConsumer(controller, hook string) Consumer {
	return Consumer{Stream: Requests.Name, Config: jetstream.ConsumerConfig{
		Durable:       bus.HookConsumer(controller, hook),
		Description:   fmt.Sprintf("%s hook of controller %s", hook, controller),
		FilterSubject: bus.HookRequests(controller, hook),
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       bus.AckWait,
		MaxAckPending: 1000,
		MemoryStorage: ConsumerStateInMemory,
	}}
}

// HookConsumers of one controller: one per hook it may declare.
func hookConsumers(controller string) []Consumer {
	var cs []Consumer
	for _, h := range hooks.All {
		cs = append(cs, HookConsumer(controller, h))
	}
	return cs
}

// ApplierConsumer is the appliers' consumer of partition n: the sync and
// finalize replies of the partition's parents, and the replies of sync
// hooks' shadows, which the applier compares with the sync hooks' and
// never applies. One applier replica at a time consumes it, the one
// holding the partition.
func ApplierConsumer(n int) Consumer {
	return Consumer{Stream: Replies.Name, Config: jetstream.ConsumerConfig{
		Durable:        "applier_" + strconv.Itoa(n),
		Description:    fmt.Sprintf("appliers, partition %d", n),
		FilterSubjects: []string{bus.PartitionReplies(hooks.Sync, n), bus.PartitionReplies(hooks.Finalize, n), bus.PartitionReplies(hooks.SyncShadow, n)},
		AckPolicy:      jetstream.AckExplicitPolicy,
		AckWait:        bus.AckWait,
		MaxAckPending:  5000,
		MemoryStorage:  ConsumerStateInMemory,
	}}
}

// partitionConsumers are the consumers of the partitions 0 to n-1, each
// of(partition): ApplierConsumer, WatcherConsumerOf.
func partitionConsumers(n int, of func(int) Consumer) []Consumer {
	cs := make([]Consumer, n)
	for i := range cs {
		cs[i] = of(i)
	}
	return cs
}

// WatcherConsumer is the active watcher's consumer of the customize replies
// of every controller.
var WatcherConsumer = Consumer{Stream: Replies.Name, Config: jetstream.ConsumerConfig{
	Durable:       "watcher",
	Description:   "watcher: customize replies",
	FilterSubject: bus.HookReplies(hooks.Customize),
	AckPolicy:     jetstream.AckExplicitPolicy,
	AckWait:       bus.AckWait,
}}

// WatcherConsumerOf is the sharded watchers' consumer of partition n (see
// ShardedWatcher): the customize replies of the partition's parents. One
// watcher replica at a time consumes it, the one holding the partition.
// Replies is a work queue, whose consumers' filters may not overlap: the
// consumers of the partitions cannot exist beside WatcherConsumer.
func WatcherConsumerOf(n int) Consumer {
	return Consumer{Stream: Replies.Name, Config: jetstream.ConsumerConfig{
		Durable:       "watcher_" + strconv.Itoa(n),
		Description:   fmt.Sprintf("watchers: customize replies, partition %d", n),
		FilterSubject: bus.PartitionReplies(hooks.Customize, n),
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       bus.AckWait,
		MemoryStorage: ConsumerStateInMemory,
	}}
}

// EnsureConsumer creates the durable consumer, or updates it to its
// configuration. A consumer the server cannot update in place — one whose
// configuration differs in a field fixed at its creation, as the state
// storage of one made by an older uc — is deleted and created again: its
// stream is a work queue, so what it had not acknowledged stays and is
// delivered again.
func EnsureConsumer(ctx context.Context, js jetstream.JetStream, c Consumer) (jetstream.Consumer, error) {
	cons, err := js.CreateOrUpdateConsumer(ctx, c.Stream, c.Config)
	var apiErr *jetstream.APIError
	if err == nil || !errors.As(err, &apiErr) || apiErr.ErrorCode != jetstream.JSErrCodeConsumerCreate {
		return cons, err
	}
	// The server refuses an update with this generic code, saying why in
	// words only: look at the consumer it has.
	old, infoErr := js.Consumer(ctx, c.Stream, c.Name())
	if infoErr != nil || !fixedAtCreationDiffers(old.CachedInfo().Config, c.Config) {
		return nil, err
	}
	if err := js.DeleteConsumer(ctx, c.Stream, c.Name()); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return nil, fmt.Errorf("replace consumer %s (%s): %w", c.Name(), apiErr.Description, err)
	}
	return js.CreateOrUpdateConsumer(ctx, c.Stream, c.Config)
}

// errCodeNotUnique is the server's refusal of a consumer whose filter
// overlaps another consumer's on a work-queue stream
// (JSConsumerWQConsumerNotUniqueErr).
const errCodeNotUnique jetstream.ErrorCode = 10100

// overlaps tells whether err is the server's refusal of a consumer that
// overlaps another on a work-queue stream.
func overlaps(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == errCodeNotUnique
}

// deleteConsumers deletes those of cs that exist, and names them. It
// deletes them all at once: a process that creates one of them again as
// soon as it is deleted (a watcher of the other kind, still running) has
// less time to before the caller creates its own.
func deleteConsumers(ctx context.Context, js jetstream.JetStream, cs []Consumer) ([]string, error) {
	errs := make([]error, len(cs))
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Go(func() { errs[i] = js.DeleteConsumer(ctx, c.Stream, c.Name()) })
	}
	wg.Wait()
	var deleted, failed []string
	var first error
	for i, err := range errs {
		switch {
		case err == nil:
			deleted = append(deleted, cs[i].Name())
		case !errors.Is(err, jetstream.ErrConsumerNotFound):
			failed = append(failed, cs[i].Name())
			first = cmp.Or(first, err)
		}
	}
	if first != nil {
		return deleted, fmt.Errorf("delete consumers %v: %w", failed, first)
	}
	return deleted, nil
}

// fixedAtCreationDiffers tells whether the configuration of an existing
// pull consumer differs from cfg in a field that nats-server does not
// update in place (its checkNewConsumerConfig).
func fixedAtCreationDiffers(old, cfg jetstream.ConsumerConfig) bool {
	sameStart := (old.OptStartTime == nil) == (cfg.OptStartTime == nil) &&
		(old.OptStartTime == nil || old.OptStartTime.Equal(*cfg.OptStartTime))
	return old.MemoryStorage != cfg.MemoryStorage || old.DeliverPolicy != cfg.DeliverPolicy ||
		old.AckPolicy != cfg.AckPolicy || old.ReplayPolicy != cfg.ReplayPolicy ||
		old.OptStartSeq != cfg.OptStartSeq || !sameStart
}
