package topology_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/util/wait"

	"universalcontroller.dev/uc/internal/bustest"
	"universalcontroller.dev/uc/internal/topology"
	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
)

// TestKeptConsumer: a consumer lost with a NATS restart, or deleted, is
// created again by Check, and what was published meanwhile is consumed.
func TestKeptConsumer(t *testing.T) {
	tests := []struct {
		name     string
		inMemory bool
		lose     func(t *testing.T, s *bustest.Server, js jetstream.JetStream)
		// lost: the consumption reports it (onLost) before any Check.
		lost bool
	}{
		{"state in memory, NATS restarted", true, restart, false},
		{"state in files, NATS restarted", false, restart, false},
		{"deleted", true, deleteConsumer, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, js := bustest.RestartableJetStream(t)
			ctx := t.Context()
			got := make(chan string, 10)
			lost := make(chan struct{}, 1)
			k, err := topology.KeepConsuming(ctx, js, topology.Consumer{Stream: bus.ReplyStream, Config: jetstream.ConsumerConfig{
				Durable: "kept", FilterSubject: bus.ReplyPrefix + ".c.>", AckPolicy: jetstream.AckExplicitPolicy,
				MemoryStorage: tt.inMemory,
			}}, func(msg jetstream.Msg) {
				_ = msg.DoubleAck(ctx) // acknowledged before the test goes on
				got <- string(msg.Data())
			}, func() {
				select {
				case lost <- struct{}{}:
				default:
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(k.Stop)
			publish(t, js, "before")
			receive(t, got, "before")

			tt.lose(t, s, js)
			if tt.lost {
				select {
				case <-lost:
				case <-time.After(10 * time.Second):
					t.Fatal("the consumption did not report the consumer lost")
				}
			}
			_, err = js.Consumer(ctx, bus.ReplyStream, "kept")
			if gone := errors.Is(err, jetstream.ErrConsumerNotFound); gone != (tt.inMemory || tt.lost) {
				t.Fatalf("consumer gone %v (%v), want %v", gone, err, tt.inMemory || tt.lost)
			}
			publish(t, js, "after")
			recreated, err := k.Check(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if want := tt.inMemory || tt.lost; recreated != want {
				t.Errorf("Check recreated the consumer: %v, want %v", recreated, want)
			}
			receive(t, got, "after")
			if recreated, err := k.Check(ctx); recreated || err != nil {
				t.Errorf("a second Check: recreated %v, %v; want false, nil", recreated, err)
			}
		})
	}
}

func restart(t *testing.T, s *bustest.Server, _ jetstream.JetStream) { s.Restart() }

func deleteConsumer(t *testing.T, _ *bustest.Server, js jetstream.JetStream) {
	if err := js.DeleteConsumer(t.Context(), bus.ReplyStream, "kept"); err != nil {
		t.Fatal(err)
	}
}

// publish publishes data on a reply subject, retrying while the client
// reconnects.
func publish(t *testing.T, js jetstream.JetStream, data string) {
	t.Helper()
	var err error
	if wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		ctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		_, err = js.Publish(ctx, bus.ReplyPrefix+".c.sync.0.u", []byte(data))
		return err == nil, nil
	}) != nil {
		t.Fatalf("publish %s: %v", data, err)
	}
}

func receive(t *testing.T, got <-chan string, want string) {
	t.Helper()
	select {
	case data := <-got:
		if data != want {
			t.Fatalf("consumed %q, want %q", data, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%q was not consumed", want)
	}
}

// TestKeptConsumerDisplaces: a kept consumer that the server refuses
// because consumers of the other kind of watcher overlap it on the
// work-queue stream deletes those its role's Deletes name, saying which,
// and is created; the reply that waited on one of them is consumed by it.
// A consumer past them still in the way is an error that says so, and a
// consumer kept without displacing is refused.
func TestKeptConsumerDisplaces(t *testing.T) {
	const partitions = 3
	one, shards := topology.WatcherConsumer, []topology.Consumer{topology.WatcherConsumerOf(0), topology.WatcherConsumerOf(2)}
	tests := []struct {
		name string
		// left are the consumers there before; kept, the consumer kept,
		// displacing those of role.
		left []topology.Consumer
		kept topology.Consumer
		role topology.Role
		// deleted are those left it deletes; err, what its error says,
		// if it fails.
		deleted []string
		err     string
	}{
		{"the one watcher, after shards", shards, one, topology.Watcher(partitions), []string{"watcher_0", "watcher_2"}, ""},
		{"a shard, after the one watcher", []topology.Consumer{one}, shards[1], topology.ShardedWatcher(partitions), []string{"watcher"}, ""},
		{"the one watcher, after shards of more partitions", append(shards, topology.WatcherConsumerOf(partitions)), one, topology.Watcher(partitions),
			[]string{"watcher_0", "watcher_2"}, "another consumer of UC_REPLIES overlaps it"},
		{"kept without displacing", shards, one, topology.Role{}, nil, "filtered consumer not unique on workqueue stream"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			js := bustest.JetStream(t)
			ctx := t.Context()
			for _, c := range tt.left {
				if _, err := topology.EnsureConsumer(ctx, js, c); err != nil {
					t.Fatal(err)
				}
			}
			// A customize reply of partition 2, waiting for the
			// consumers left.
			reply := bus.Address{Controller: "c", Hook: hooks.Customize, Partition: 2, ParentUID: "u"}.ReplySubject()
			if _, err := js.Publish(ctx, reply, []byte("waited")); err != nil {
				t.Fatal(err)
			}
			var logs bytes.Buffer
			got := make(chan string, 1)
			k, err := topology.KeepDisplacing(ctx, js, tt.kept, topology.Displacing{Consumers: tt.role.Deletes, Log: slog.New(slog.NewTextHandler(&logs, nil))},
				func(msg jetstream.Msg) {
					_ = msg.DoubleAck(ctx)
					got <- string(msg.Data())
				}, nil)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("KeepDisplacing: %v, want an error saying %q", err, tt.err)
				}
			} else {
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(k.Stop)
				receive(t, got, "waited")
			}
			for _, c := range tt.left {
				_, err := js.Consumer(ctx, c.Stream, c.Name())
				if gone, want := errors.Is(err, jetstream.ErrConsumerNotFound), slices.Contains(tt.deleted, c.Name()); gone != want {
					t.Errorf("consumer %s gone: %v (%v), want %v", c.Name(), gone, err, want)
				}
			}
			if len(tt.deleted) == 0 {
				if logs.Len() > 0 {
					t.Errorf("logged, having deleted nothing:\n%s", logs.String())
				}
				return
			}
			want := fmt.Sprintf(`msg="deleted consumers that overlap this one on the work-queue stream" stream=UC_REPLIES consumer=%s deleted=`, tt.kept.Name())
			if line := logLine(logs.String(), want); !strings.Contains(line, strings.Join(tt.deleted, " ")+"]") {
				t.Errorf("the log does not say %s%v:\n%s", want, tt.deleted, logs.String())
			}
		})
	}
}

// logLine is the first line of logs that holds part, or "".
func logLine(logs, part string) string {
	for line := range strings.SplitSeq(logs, "\n") {
		if strings.Contains(line, part) {
			return line
		}
	}
	return ""
}

// TestKeptConsumerDisplacesOnItsChecks: while a process of the other kind
// of watcher still runs, creating its consumer again once the kept one
// took its place, the kept consumer's Check displaces it again; the check
// that follows the consumption's report of its consumer deleted does not
// (see topology.Displacing), so the two do not delete each other's at the
// pace of the network.
func TestKeptConsumerDisplacesOnItsChecks(t *testing.T) {
	js := bustest.JetStream(t)
	ctx := t.Context()
	shard := topology.WatcherConsumerOf(1)
	var logs bytes.Buffer
	k, err := topology.KeepDisplacing(ctx, js, topology.WatcherConsumer, topology.Displacing{Consumers: topology.Watcher(2).Deletes, Log: slog.New(slog.NewTextHandler(&logs, nil))},
		func(msg jetstream.Msg) { _ = msg.Ack() }, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Stop)
	// The shard deletes the one watcher's consumer and creates its own.
	if err := js.DeleteConsumer(ctx, topology.WatcherConsumer.Stream, topology.WatcherConsumer.Name()); err != nil {
		t.Fatal(err)
	}
	if _, err := topology.EnsureConsumer(ctx, js, shard); err != nil {
		t.Fatal(err)
	}
	if recreated, err := topology.CheckWithoutDisplacing(ctx, k); !recreated || err == nil {
		t.Fatalf("the check after a lost consumption: recreated %v, %v; want true and the server's refusal", recreated, err)
	}
	if _, err := js.Consumer(ctx, shard.Stream, shard.Name()); err != nil {
		t.Fatalf("the check after a lost consumption deleted the shard's consumer: %v", err)
	}
	if recreated, err := k.Check(ctx); !recreated || err != nil {
		t.Fatalf("Check: recreated %v, %v; want true, nil", recreated, err)
	}
	if _, err := js.Consumer(ctx, shard.Stream, shard.Name()); !errors.Is(err, jetstream.ErrConsumerNotFound) {
		t.Errorf("Check left the shard's consumer: %v", err)
	}
	if !strings.Contains(logs.String(), "deleted=[watcher_1]") {
		t.Errorf("the log does not name the shard's consumer deleted:\n%s", logs.String())
	}
}
