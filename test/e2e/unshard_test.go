package e2e

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"universalcontroller.dev/uc/internal/topology"
	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/schemas/v1alpha1"
	"universalcontroller.dev/uc/sdk/go/hook"
)

// TestWatcherShardsTurnedOff turns watcher sharding on and off again, as a
// rolling change of flags does, for a controller with a customize hook:
// two shards (uc watcher --shard-watchers) and a sharded applier serve it,
// each shard taking the customize replies of its partitions from their
// consumers watcher_<n>. Then one shard stops, the applier restarts
// unsharded and the one watcher starts while the other shard still runs,
// a customize reply held until then is answered, and the last shard stops.
// The one watcher deletes the shards' consumers, which overlap its own on
// the work-queue stream, with no manual step: the reply held across the
// change and those of parents created after it are taken, every parent is
// synced with its related objects, and no customize reply is left waiting.
func TestWatcherShardsTurnedOff(t *testing.T) {
	ctx := t.Context()
	const controller, install = "unshard", "unshard"
	b := rolesOfInstall(t, install, "--partitions", strconv.Itoa(shardPartitions))
	ns, js := b.ns, b.js

	// The hooks, on the bus: customize relates the ConfigMaps labelled
	// with the parent's name, and may be held for a parent; sync lists
	// them in the parent's ConfigMap.
	const relatedLabel = "e2e.universalcontroller.dev/related-to"
	var held gates
	var mu sync.Mutex
	asked := map[string]int{} // customize calls by parent
	customize := func(ctx context.Context, req *hooks.CustomizeRequest) (*hooks.CustomizeResponse, error) {
		name := req.Parent.GetName()
		mu.Lock()
		asked[name]++
		mu.Unlock()
		if err := held.wait(ctx, name); err != nil {
			return nil, err
		}
		return &hooks.CustomizeResponse{RelatedResources: []hooks.RelatedResourceRule{{
			APIVersion: "v1", Resource: "configmaps", Namespace: req.Parent.GetNamespace(),
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{relatedLabel: name}},
		}}}, nil
	}
	syncHook := func(_ context.Context, req *hooks.SyncRequest) (*hooks.SyncResponse, error) {
		var related []string
		for key := range req.Related["ConfigMap.v1"] {
			related = append(related, key)
		}
		slices.Sort(related)
		child := cm(req.Parent.GetName(), nil, map[string]any{"related": strings.Join(related, ",")})
		return &hooks.SyncResponse{Children: []*unstructured.Unstructured{{Object: child}}}, nil
	}
	for _, h := range []hook.Handler{hook.Func(hooks.Customize, customize), hook.Func(hooks.Sync, syncHook)} {
		go func() { _ = hook.Serve(ctx, js, controller, h) }()
	}
	registerEchoControllerHooks(t, controller, v1alpha1.Hooks{
		Sync:      v1alpha1.SyncHook{Hook: v1alpha1.Hook{Version: v1alpha1.HookV2}},
		Customize: &v1alpha1.Hook{Version: v1alpha1.HookV2},
	}, func(uc *v1alpha1.UniversalController) { uc.Labels = map[string]string{installLabel: install} })

	// relate creates a ConfigMap related to the parent.
	relate := func(parent, name string) {
		t.Helper()
		if _, err := env.kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Name: name, Labels: map[string]string{relatedLabel: parent}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// lists checks the parent's ConfigMap lists the related ConfigMaps.
	lists := func(parent string, related ...string) func() error {
		return func() error {
			c, err := getConfigMap(ctx, ns, parent)
			if err != nil {
				return err
			}
			want := make([]string, len(related))
			for i, r := range related {
				want[i] = ns + "/" + r
			}
			if got := c.Data["related"]; got != strings.Join(want, ",") {
				return fmt.Errorf("%s lists the related %q, want %q", parent, got, strings.Join(want, ","))
			}
			return nil
		}
	}
	// consumers checks which of the watchers' consumers of customize
	// replies exist: the one watcher's, or the shards' of every
	// partition.
	consumers := func(one bool) func() error {
		return func() error {
			want := map[string]bool{topology.WatcherConsumer.Name(): one}
			for n := range shardPartitions {
				want[topology.WatcherConsumerOf(n).Name()] = !one
			}
			for name, exists := range want {
				_, err := js.Consumer(ctx, bus.ReplyStream, name)
				switch {
				case errors.Is(err, jetstream.ErrConsumerNotFound):
					if exists {
						return fmt.Errorf("consumer %s does not exist", name)
					}
				case err != nil:
					return err
				case !exists:
					return fmt.Errorf("consumer %s still exists", name)
				}
			}
			return nil
		}
	}

	b.start("dispatcher", "dispatcher")
	applier := b.start("applier", "applier", "--shard-watchers")
	startShard := func(name string) *roleProcess {
		return b.start(name, "watcher", "--shard-watchers", "--replica-id", name)
	}
	shards := []*roleProcess{startShard("watcher-1"), startShard("watcher-2")}
	if !t.Run("sharded: the shards take the customize replies", func(t *testing.T) {
		relate("first", "first-a")
		createEcho(t, ns, "first", controller, "", "")
		eventually(t, 2*time.Minute, lists("first", "first-a"))
		eventually(t, time.Minute, consumers(false))
	}) {
		return
	}

	var one *roleProcess
	if !t.Run("turned off mid-roll: the one watcher starts while a shard still runs", func(t *testing.T) {
		// A customize call is held across the change: its reply is
		// published once the one watcher runs.
		release := held.hold("held")
		defer release()
		relate("held", "held-a")
		createEcho(t, ns, "held", controller, "", "")
		eventually(t, time.Minute, func() error {
			mu.Lock()
			defer mu.Unlock()
			if asked["held"] == 0 {
				return errors.New("the shards asked no customize hook about the parent held yet")
			}
			return nil
		})
		shards[0].proc.Stop(5 * time.Second)
		applier.proc.Stop(5 * time.Second)
		b.start("applier-one", "applier")
		one = b.start("watcher-one", "watcher", "--leader-elect=false")
		eventually(t, time.Minute, func() error {
			if !one.logHas("uc started") {
				return errors.New("the one watcher has not started yet")
			}
			return nil
		})
		release()
		shards[1].proc.Stop(5 * time.Second)
	}) {
		return
	}

	t.Run("unsharded: the one watcher takes the customize replies", func(t *testing.T) {
		eventually(t, 2*time.Minute, lists("held", "held-a"))
		relate("after", "after-a")
		createEcho(t, ns, "after", controller, "", "")
		eventually(t, time.Minute, lists("after", "after-a"))
		relate("first", "first-b")
		eventually(t, time.Minute, lists("first", "first-a", "first-b"))
		eventually(t, time.Minute, consumers(true))
		eventually(t, time.Minute, func() error {
			s, err := js.Stream(ctx, bus.ReplyStream)
			if err != nil {
				return err
			}
			info, err := s.Info(ctx, jetstream.WithSubjectFilter(bus.HookReplies(hooks.Customize)))
			if err != nil {
				return err
			}
			if n := len(info.State.Subjects); n != 0 {
				return fmt.Errorf("%d customize replies wait in %s: %v", n, bus.ReplyStream, info.State.Subjects)
			}
			return nil
		})
		if !one.logHas("deleted consumers", topology.WatcherConsumerOf(0).Name()) {
			t.Errorf("the one watcher logged no deletion of the shards' consumers")
		}
	})
}
