package topology_test

import (
	"slices"
	"testing"

	"github.com/nats-io/nats-server/v2/server"

	"universalcontroller.dev/uc/internal/topology"
)

// TestWatchersDeleteTheOtherKindsConsumers: the one watcher and a shard
// each declare deleting exactly the consumers of the other kind, of the
// installation's partitions, that overlap one of their own on the
// work-queue stream (which the server refuses beside them), and the
// watcher's NATS user may do both (EitherWatcher).
func TestWatchersDeleteTheOtherKindsConsumers(t *testing.T) {
	const partitions = 4
	shards := make([]topology.Consumer, partitions)
	for n := range shards {
		shards[n] = topology.WatcherConsumerOf(n)
	}
	one := []topology.Consumer{topology.WatcherConsumer}
	for _, tt := range []struct {
		name  string
		role  topology.Role
		other []topology.Consumer // the other kind's consumers
	}{
		{"the one watcher", topology.Watcher(partitions), shards},
		{"a shard", topology.ShardedWatcher(partitions), one},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var overlapping []string
			for _, o := range tt.other {
				if slices.ContainsFunc(tt.role.Consumes, func(c topology.Consumer) bool { return overlap(c, o) }) {
					overlapping = append(overlapping, o.Name())
				}
			}
			if got := names(tt.role.Deletes); !slices.Equal(got, overlapping) {
				t.Errorf("it deletes %v, want those of the other kind that overlap its own: %v", got, overlapping)
			}
		})
	}
	either := names(topology.EitherWatcher(partitions).Deletes)
	for _, c := range append(slices.Clone(shards), one...) {
		if !slices.Contains(either, c.Name()) {
			t.Errorf("the watcher's NATS user may not delete %s: it deletes %v", c.Name(), either)
		}
	}
}

// overlap tells whether the filters of two consumers of a stream overlap.
func overlap(a, b topology.Consumer) bool {
	if a.Stream != b.Stream {
		return false
	}
	for _, f := range filters(a) {
		if slices.ContainsFunc(filters(b), func(g string) bool { return server.SubjectsCollide(f, g) }) {
			return true
		}
	}
	return false
}

func filters(c topology.Consumer) []string {
	if c.Config.FilterSubject != "" {
		return []string{c.Config.FilterSubject}
	}
	return c.Config.FilterSubjects
}

func names(cs []topology.Consumer) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Name()
	}
	return out
}
