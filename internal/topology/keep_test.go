package topology_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/util/wait"

	"universalcontroller.dev/uc/internal/bustest"
	"universalcontroller.dev/uc/internal/topology"
	"universalcontroller.dev/uc/schemas/bus"
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
