package topology_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/util/wait"

	"universalcontroller.dev/uc/internal/bustest"
	"universalcontroller.dev/uc/internal/topology"
	"universalcontroller.dev/uc/schemas/bus"
)

// consumerNames are the consumers' names.
func consumerNames(cs []topology.Consumer) []string {
	var ns []string
	for _, c := range cs {
		ns = append(ns, c.Name())
	}
	return ns
}

// TestHookConsumersKept: the hook consumers of a registered controller are
// created, created again after a NATS restart lost them (or someone
// deleted them), and deleted with their hook or the controller.
func TestHookConsumersKept(t *testing.T) {
	s, js := bustest.RestartableJetStream(t)
	kept := topology.NewHookConsumers(js, slog.Default())
	go func() { _ = kept.Run(t.Context()) }()
	const ctl = "a.example.com"
	kept.Declare(ctl, []string{"sync", "finalize"})
	names := []string{bus.HookConsumer(ctl, "finalize"), bus.HookConsumer(ctl, "sync")}
	if got := consumerNames(kept.Consumers()); !slices.Equal(got, names) {
		t.Fatalf("consumers %v, want %v", got, names)
	}
	// exist waits until the consumers exist, made after since, or until
	// they do not exist.
	exist := func(want bool, since time.Time) {
		t.Helper()
		var err error
		if wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 3*bus.CheckEvery, true, func(ctx context.Context) (bool, error) {
			for _, name := range names {
				var c jetstream.Consumer
				c, err = js.Consumer(ctx, bus.RequestStream, name)
				switch {
				case want && err == nil && c.CachedInfo().Created.Before(since):
					err = fmt.Errorf("%s was made at %s, before %s", name, c.CachedInfo().Created, since)
					return false, nil
				case want != (err == nil):
					return false, nil
				}
			}
			return true, nil
		}) != nil {
			t.Fatalf("the hook consumers %v exist: %v, want %v (%v)", names, !want, want, err)
		}
	}
	exist(true, time.Time{})

	restarted := time.Now()
	s.Restart()
	exist(true, restarted)

	deleted := time.Now()
	for _, name := range names {
		if err := js.DeleteConsumer(t.Context(), bus.RequestStream, name); err != nil {
			t.Fatal(err)
		}
	}
	exist(true, deleted)

	kept.Declare(ctl, []string{"sync"}) // the finalize hook dropped
	if got, want := consumerNames(kept.Consumers()), names[1:]; !slices.Equal(got, want) {
		t.Fatalf("consumers %v, want %v", got, want)
	}
	names = names[:1]
	exist(false, time.Time{})

	names = []string{bus.HookConsumer(ctl, "sync")}
	kept.Declare(ctl, nil) // removed
	exist(false, time.Time{})
	if got := kept.Consumers(); len(got) != 0 {
		t.Errorf("consumers of a removed controller: %v", got)
	}
}
