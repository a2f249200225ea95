package natsauth

import (
	"slices"
	"testing"

	"github.com/nats-io/nats-server/v2/server"

	"universalcontroller.dev/uc/internal/topology"
	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
)

// The bus the test looks at: two controllers, one of whose names extends
// the other's, and an installation of testPartitions partitions (the
// consumer of one more partition exists, of another installation).
const (
	own, other     = "foo", "foo.bar"
	testPartitions = 4
)

// TestPermissionsAreTheRoles: each user may publish exactly what its
// topology.Role does. Every operation of the bus (the JetStream API calls
// on each stream, consumer and bucket, acks, messages on every subject)
// is allowed if the role's declaration uses it and refused otherwise, and
// every subject the user is allowed serves an operation the role uses.
func TestPermissionsAreTheRoles(t *testing.T) {
	for _, tc := range []struct {
		name string
		user User
		role topology.Role
	}{
		{"watcher, one or a shard", must(Role(Watcher, testPartitions)), topology.EitherWatcher(testPartitions)},
		{"dispatcher", must(Role(Dispatcher, testPartitions)), topology.Dispatcher()},
		{"applier", must(Role(Applier, testPartitions)), topology.Applier(testPartitions)},
		{"hook workers", HookWorker(own), topology.HookWorkers(own)},
		{"inspector", Inspector(), topology.Inspector()},
		{"operator", Operator(), topology.Operator()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			uses := operations(tc.role)
			for _, op := range allOperations() {
				allowed := slices.ContainsFunc(tc.user.Publish, func(p string) bool { return server.SubjectMatchesFilter(op, p) })
				if want := slices.Contains(uses, op); allowed != want {
					t.Errorf("%s may publish %s: %v; its role uses it: %v", tc.user.Name, op, allowed, want)
				}
			}
			for _, p := range tc.user.Publish {
				if !slices.ContainsFunc(uses, func(op string) bool { return server.SubjectMatchesFilter(op, p) }) {
					t.Errorf("%s may publish %s, which no operation of its role needs", tc.user.Name, p)
				}
			}
			if got := tc.user.Subscribe[1:]; !slices.Equal(got, tc.role.Listens) || tc.user.Responses != tc.role.Answers {
				t.Errorf("%s subscribes to %q (answering: %v), its role listens to %q (%v)", tc.user.Name, got, tc.user.Responses, tc.role.Listens, tc.role.Answers)
			}
		})
	}
}

func must(u User, err error) User {
	if err != nil {
		panic(err)
	}
	return u
}

// consumers are every consumer on the bus.
func consumers() []topology.Consumer {
	cs := []topology.Consumer{topology.WatcherConsumer}
	for n := range testPartitions + 1 {
		cs = append(cs, topology.ApplierConsumer(n), topology.WatcherConsumerOf(n))
	}
	for _, c := range []string{own, other} {
		for _, h := range hooks.All {
			cs = append(cs, topology.HookConsumer(c, h))
		}
	}
	return cs
}

// resolve is the consumers c stands for: itself, or every consumer of its
// stream.
func resolve(c topology.Consumer) []topology.Consumer {
	if c.Name() != "" {
		return []topology.Consumer{c}
	}
	return slices.DeleteFunc(consumers(), func(d topology.Consumer) bool { return d.Stream != c.Stream })
}

// The subjects of the JetStream API calls, as nats.go sends them, on one
// stream, consumer or bucket.
func createStream(s string) []string {
	return []string{"$JS.API.STREAM.CREATE." + s, "$JS.API.STREAM.UPDATE." + s, streamInfo(s)}
}

func createConsumer(c topology.Consumer) []string {
	api := c.Stream + "." + c.Name()
	return []string{"$JS.API.CONSUMER.CREATE." + api, "$JS.API.CONSUMER.CREATE." + api + ".uc.req.x.sync.>",
		"$JS.API.CONSUMER.DURABLE.CREATE." + api, "$JS.API.CONSUMER.INFO." + api}
}

func consume(c topology.Consumer) []string {
	api := c.Stream + "." + c.Name()
	return []string{"$JS.API.CONSUMER.INFO." + api, "$JS.API.CONSUMER.MSG.NEXT." + api, "$JS.ACK." + api + ".1.7.3.1700000000000000000.0"}
}

func readBucket(b topology.Bucket) []string {
	return []string{streamInfo(b.Stream()), "$JS.API.DIRECT.GET." + b.Stream() + ".$KV." + b.Name + ".k", "$JS.API.STREAM.MSG.GET." + b.Stream()}
}

func writeBucket(b topology.Bucket) []string {
	return []string{"$KV." + b.Name + ".k", "$JS.API.CONSUMER.CREATE." + b.Stream() + ".o1.$KV." + b.Name + ".>",
		"$JS.API.CONSUMER.DELETE." + b.Stream() + ".o1", "$JS.FC." + b.Stream() + ".x.1"}
}

// messages are a message on every subject of the bus, of both controllers.
func messages() []string {
	var subjects []string
	for _, c := range []string{own, other} {
		a := bus.Address{Controller: c, Hook: hooks.Sync, Partition: 1, ParentUID: "u"}
		subjects = append(subjects, a.RequestSubject(), a.ReplySubject(), a.DeadLetterSubject(),
			a.ResyncSubject(), a.ApplyingSubject(), a.InspectSubject(), a.PlanSubject())
	}
	return subjects
}

// operations are the publish subjects of everything the role does.
func operations(r topology.Role) []string {
	var ops []string
	for _, s := range r.Creates.Streams {
		ops = append(ops, createStream(s.Name)...)
	}
	for _, c := range r.Creates.Consumers {
		for _, c := range resolve(c) {
			ops = append(ops, createConsumer(c)...)
		}
	}
	for _, b := range r.Creates.Buckets {
		ops = append(ops, append(createStream(b.Stream()), "$JS.API.INFO")...)
	}
	for _, s := range r.WaitsFor.Streams {
		ops = append(ops, streamInfo(s.Name))
	}
	for _, c := range r.WaitsFor.Consumers {
		for _, c := range resolve(c) {
			ops = append(ops, "$JS.API.CONSUMER.INFO."+c.Stream+"."+c.Name())
		}
	}
	for _, s := range r.Reads.Streams {
		ops = append(ops, streamInfo(s.Name), "$JS.API.STREAM.MSG.GET."+s.Name)
	}
	for _, c := range r.Reads.Consumers {
		for _, c := range resolve(c) {
			ops = append(ops, "$JS.API.CONSUMER.INFO."+c.Stream+"."+c.Name())
		}
	}
	for _, b := range r.Reads.Buckets {
		ops = append(ops, readBucket(b)...)
	}
	for _, c := range r.Consumes {
		for _, c := range resolve(c) {
			ops = append(ops, consume(c)...)
		}
	}
	for _, b := range r.Writes {
		ops = append(ops, writeBucket(b)...)
	}
	for _, c := range r.Deletes {
		for _, c := range resolve(c) {
			ops = append(ops, "$JS.API.CONSUMER.DELETE."+c.Stream+"."+c.Name())
		}
	}
	for _, s := range r.DeletesMessagesOf {
		ops = append(ops, "$JS.API.STREAM.MSG.DELETE."+s.Name)
	}
	for _, m := range messages() {
		if slices.ContainsFunc(r.Publishes, func(p string) bool { return server.SubjectMatchesFilter(m, p) }) {
			ops = append(ops, m)
		}
	}
	return ops
}

// allOperations are every operation of every role, and those no role may
// do: deleting and purging streams and buckets.
func allOperations() []string {
	ops := []string{"$JS.API.INFO"}
	for _, s := range topology.Streams {
		ops = append(ops, createStream(s.Name)...)
		ops = append(ops, "$JS.API.STREAM.MSG.GET."+s.Name, "$JS.API.STREAM.MSG.DELETE."+s.Name,
			"$JS.API.STREAM.DELETE."+s.Name, "$JS.API.STREAM.PURGE."+s.Name)
	}
	for _, c := range consumers() {
		ops = append(ops, createConsumer(c)...)
		ops = append(ops, consume(c)...)
		ops = append(ops, "$JS.API.CONSUMER.DELETE."+c.Stream+"."+c.Name())
	}
	for _, b := range []topology.Bucket{topology.Fence, topology.Appliers, topology.Partitions, topology.Watchers, topology.WatcherPartitions} {
		ops = append(ops, createStream(b.Stream())...)
		ops = append(ops, readBucket(b)...)
		ops = append(ops, writeBucket(b)...)
		ops = append(ops, "$JS.API.STREAM.DELETE."+b.Stream(), "$JS.API.STREAM.PURGE."+b.Stream())
	}
	return append(ops, messages()...)
}
