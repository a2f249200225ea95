package dispatcher_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/util/wait"

	"universalcontroller.dev/uc/dispatcher"
	"universalcontroller.dev/uc/internal/bustest"
	"universalcontroller.dev/uc/internal/registry"
	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// registrations hands the topology's listener to the test.
type registrations struct{ listener registry.Listener }

func (r *registrations) Subscribe(l registry.Listener) { r.listener = l }

// TestTopologyKeepsHookConsumers: the hook consumers of a registered
// controller are created, created again after a NATS restart lost them (or
// someone deleted them), and deleted with their hook or the controller.
func TestTopologyKeepsHookConsumers(t *testing.T) {
	s, js := bustest.RestartableJetStream(t)
	reg := &registrations{}
	topology := dispatcher.NewTopology(js, reg, slog.Default())
	go func() { _ = topology.Run(t.Context()) }()
	ctl := &registry.Controller{Name: "a.example.com", Spec: v1alpha1.UniversalControllerSpec{Hooks: v1alpha1.ControllerHooks{Hooks: v1alpha1.Hooks{Finalize: &v1alpha1.Hook{}}}}}
	reg.listener(nil, ctl)
	names := []string{bus.HookConsumer(ctl.Name, "finalize"), bus.HookConsumer(ctl.Name, "sync")}
	if got := topology.Consumers(); !slices.Equal(got, names) {
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

	synced := &registry.Controller{Name: ctl.Name, Generation: 2} // the finalize hook dropped
	reg.listener(ctl, synced)
	if got, want := topology.Consumers(), names[1:]; !slices.Equal(got, want) {
		t.Fatalf("consumers %v, want %v", got, want)
	}
	names = names[:1]
	exist(false, time.Time{})

	names = []string{bus.HookConsumer(ctl.Name, "sync")}
	reg.listener(synced, nil)
	exist(false, time.Time{})
	if got := topology.Consumers(); len(got) != 0 {
		t.Errorf("consumers of a removed controller: %v", got)
	}
}
