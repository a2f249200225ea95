package topology

import (
	"fmt"
	"slices"

	"universalcontroller.dev/uc/schemas/bus"
)

// Role is what one party on the bus does with it: one of uc's roles, the
// hook workers of a controller, or one of uc's commands that look into
// the pipeline. internal/natsauth gives its NATS user the permissions of
// exactly this.
type Role struct {
	// Name is the role's: watcher, dispatcher, applier, hook-workers,
	// inspector, operator.
	Name string
	// About says in one line what it does.
	About string
	// Creates are the streams, consumers and buckets it creates, updates to
	// their configuration, and creates again when they are lost.
	Creates Resources
	// WaitsFor are what another role creates and this one needs before it
	// works.
	WaitsFor Resources
	// Reads are what it reads when there: a stream's messages, a
	// consumer's state, a bucket's keys.
	Reads Resources
	// Consumes are the consumers it pulls messages from and acknowledges.
	Consumes []Consumer
	// Writes are the buckets whose keys it puts, deletes and lists.
	Writes []Bucket
	// Deletes are the consumers it deletes.
	Deletes []Consumer
	// DeletesMessagesOf are the streams it deletes single messages of.
	DeletesMessagesOf []Stream
	// Publishes are the subjects it publishes on: messages of the streams,
	// and core NATS messages to other roles.
	Publishes []string
	// Listens are the core NATS subjects it subscribes to.
	Listens []string
	// Answers tells that it answers the requests it listens to.
	Answers bool
}

// Resources are streams, consumers and buckets.
type Resources struct {
	Streams   []Stream
	Consumers []Consumer
	Buckets   []Bucket
}

// Watcher is the active watcher, in an installation of partitions
// partitions: it publishes hook requests, and takes the customize replies
// itself.
func Watcher(partitions int) Role {
	return Role{
		Name:     "watcher",
		About:    "uc watcher: publishes hook requests, reads customize replies, resync requests, apply notices, dead letters and fences",
		Creates:  Resources{Consumers: []Consumer{WatcherConsumer}},
		WaitsFor: Resources{Streams: []Stream{Requests, Replies}},
		// It reads the fences, to publish again a parent whose last request
		// was lost.
		Reads:    Resources{Buckets: []Bucket{Fence}},
		Consumes: []Consumer{WatcherConsumer},
		// The consumers of the partitions (WatcherConsumerOf) overlap its
		// own on the work-queue stream: it deletes them, left by the
		// installation's watchers when they were sharded (see
		// KeptConsumer's displacing). Those of partitions past the
		// installation's are not its to delete: a NATS permission names
		// each consumer, and a wildcard would give it every consumer of
		// the stream.
		Deletes: partitionConsumers(partitions, WatcherConsumerOf),
		Publishes: []string{
			Requests.Subjects(),
			// Failures it finds itself (a bad customize reply, a parent
			// without a selector) go to the applier as replies.
			Replies.Subjects(),
		},
		// It hears the dead letters as they pass, to retry their parents
		// after their backoff.
		Listens: []string{bus.AllResyncs(), bus.AllApplying(), bus.AllInspects(), DeadLetters.Subjects()},
		// It answers the resync requests of `uc resync` and the questions
		// of `uc trace`.
		Answers: true,
	}
}

// ShardedWatcher is the watcher whose replicas share the partitions (with
// internal/shares), in an installation of partitions partitions: each
// replica does what Watcher does for the parents of the partitions it
// holds, keeps the watchers' ownership buckets, and takes the customize
// replies with the consumer of each partition it holds (WatcherConsumerOf)
// instead of WatcherConsumer.
func ShardedWatcher(partitions int) Role {
	r := Watcher(partitions)
	buckets := []Bucket{Watchers, WatcherPartitions}
	consumers := partitionConsumers(partitions, WatcherConsumerOf)
	r.About = fmt.Sprintf("uc watcher: publishes the hook requests of the partitions it holds of 0-%d, reads their customize replies, resync requests, apply notices, dead letters and fences, keeps its buckets", partitions-1)
	r.Creates = Resources{Consumers: consumers, Buckets: buckets}
	r.Reads = Resources{Buckets: append([]Bucket{Fence}, buckets...)}
	r.Consumes = consumers
	r.Writes = buckets
	// The one watcher's consumer of every partition overlaps theirs on the
	// work-queue stream: a shard deletes it, left by the installation
	// before its watchers were sharded (see KeptConsumer's displacing).
	r.Deletes = []Consumer{WatcherConsumer}
	return r
}

// EitherWatcher is what a watcher's NATS user may do in an installation of
// partitions partitions: the one watcher's role and a shard's
// (ShardedWatcher), so that one configuration serves both, and the move
// from one to the other.
func EitherWatcher(partitions int) Role {
	one, shard := Watcher(partitions), ShardedWatcher(partitions)
	shard.About = "uc watcher: the one watcher of the installation, or one of its shards (--shard-watchers)"
	shard.Creates = Union(one.Creates, shard.Creates)
	shard.Reads = Union(one.Reads, shard.Reads)
	shard.Consumes = append(slices.Clip(one.Consumes), shard.Consumes...)
	shard.Deletes = append(slices.Clip(one.Deletes), shard.Deletes...)
	return shard
}

// Dispatcher is the dispatcher role: it owns the streams and the hooks'
// consumers (HookConsumers), and serves the hooks that are webhooks or
// Knative destinations (package dispatcher) as a hook worker of every
// controller.
func Dispatcher() Role {
	hooks := EveryConsumer(Requests)
	return Role{
		Name:      "dispatcher",
		About:     "uc dispatcher: creates the streams and the hooks' consumers, serves webhook and destination hooks",
		Creates:   Resources{Streams: Streams, Consumers: []Consumer{hooks}},
		Consumes:  []Consumer{hooks},
		Deletes:   []Consumer{hooks},
		Publishes: []string{Replies.Subjects(), DeadLetters.Subjects()},
	}
}

// Applier is the applier role, in an installation of partitions
// partitions: it keeps its buckets, consumes the replies of the partitions
// it holds, asks the watcher for resyncs and tells it about applies.
func Applier(partitions int) Role {
	buckets := []Bucket{Appliers, Partitions, Fence}
	consumers := partitionConsumers(partitions, ApplierConsumer)
	return Role{
		Name:      "applier",
		About:     fmt.Sprintf("uc applier: applies the replies of partitions 0-%d, keeps its buckets, asks for resyncs, announces applies, publishes dry-run plans", partitions-1),
		Creates:   Resources{Consumers: consumers, Buckets: buckets},
		WaitsFor:  Resources{Streams: []Stream{Replies}},
		Reads:     Resources{Buckets: buckets},
		Consumes:  consumers,
		Writes:    buckets,
		Publishes: []string{bus.AllResyncs(), bus.AllApplying(), Plans.Subjects()},
	}
}

// HookWorkers are the workers of one controller's hooks (sdk/go/hook, or any
// bus-native worker): they pull the controller's requests from its hooks'
// consumers, which the dispatcher creates, and publish its replies and dead
// letters.
func HookWorkers(controller string) Role {
	consumers := hookConsumers(controller)
	return Role{
		Name:     "hook-workers",
		About:    "hook workers of controller " + controller,
		WaitsFor: Resources{Consumers: consumers},
		Consumes: consumers,
		Publishes: []string{
			bus.ControllerSubjects(bus.ReplyPrefix, controller),
			bus.ControllerSubjects(bus.DeadLetterPrefix, controller),
		},
	}
}

// Inspector is uc trace, uc dlq ls and uc dlq show: it reads the streams,
// the consumers' state, the fences and the partition holds, and asks the
// watcher; it changes nothing.
func Inspector() Role {
	return Role{
		Name:  "inspector",
		About: "uc trace, uc dlq ls, uc dlq show: read the streams, the consumers, the fences and the partition holds, ask the watcher",
		Reads: Resources{
			Streams:   Streams,
			Consumers: []Consumer{EveryConsumer(Requests), EveryConsumer(Replies)},
			Buckets:   []Bucket{Fence, Partitions},
		},
		// It asks the watcher what it last published for a parent.
		Publishes: []string{bus.AllInspects()},
	}
}

// Operator is uc dlq replay and uc resync, and everything the Inspector
// does: it publishes requests again, deletes the dead letters it replayed,
// and asks the watcher for syncs.
func Operator() Role {
	r := Inspector()
	r.Name = "operator"
	r.About = "uc dlq replay, uc resync, and what uc-inspector does: publish requests again, delete replayed dead letters, ask the watcher for syncs"
	r.Publishes = append(slices.Clone(r.Publishes), Requests.Subjects(), bus.AllResyncs())
	r.DeletesMessagesOf = []Stream{DeadLetters}
	return r
}

// Union is the streams, consumers and buckets of each of rs, each once.
func Union(rs ...Resources) Resources {
	var u Resources
	for _, r := range rs {
		for _, s := range r.Streams {
			if !slices.ContainsFunc(u.Streams, func(t Stream) bool { return t.Name == s.Name }) {
				u.Streams = append(u.Streams, s)
			}
		}
		for _, c := range r.Consumers {
			if !slices.ContainsFunc(u.Consumers, func(d Consumer) bool { return d.Stream == c.Stream && d.Name() == c.Name() }) {
				u.Consumers = append(u.Consumers, c)
			}
		}
		for _, b := range r.Buckets {
			if !slices.ContainsFunc(u.Buckets, func(c Bucket) bool { return c.Name == b.Name }) {
				u.Buckets = append(u.Buckets, b)
			}
		}
	}
	return u
}
