package e2e

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// installLabel names the installation that serves a UniversalController:
// the suite's serves those without it (--controller-selector).
const installLabel = "e2e.universalcontroller.dev/install"

// TestControllerSelector: two installations on one cluster, each with its
// own NATS and a --controller-selector, serve disjoint sets of controllers.
// A controller labelled for the second is served by it alone: its hook's
// consumer exists on the second's bus and not on the suite's. With the
// label removed, the suite's installation takes it over and the second
// lets it go.
func TestControllerSelector(t *testing.T) {
	ctx := t.Context()
	second, err := startUC(ctx, env.uc.bin, env.uc.kubeconfig, filepath.Join(t.TempDir(), "second"),
		"--controller-selector", installLabel+"=second")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(second.stop)
	nc, err := nats.Connect(second.natsURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	secondJS, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}

	const controller = "selector-second"
	_, srv := newEchoHook(t, controller, plain)
	srv.Start()
	registerEchoControllerHooks(t, controller, v1alpha1.Hooks{Sync: v1alpha1.SyncHook{Hook: webhookAt(srv.URL)}}, func(uc *v1alpha1.UniversalController) {
		uc.Labels = map[string]string{installLabel: "second"}
	})
	ns := namespace(t)
	createEcho(t, ns, "served", controller, "v1", "")
	eventually(t, time.Minute, func() error { return echoSynced(ctx, ns, "served", controller, "v1") })
	consumer := bus.HookConsumer(controller, hooks.Sync)
	servedBy := func(serving, other jetstream.JetStream) func() error {
		return func() error {
			if _, err := serving.Consumer(ctx, bus.RequestStream, consumer); err != nil {
				return fmt.Errorf("the serving installation's consumer %s: %w", consumer, err)
			}
			if _, err := other.Consumer(ctx, bus.RequestStream, consumer); !errors.Is(err, jetstream.ErrConsumerNotFound) {
				return fmt.Errorf("the other installation has consumer %s (err %v)", consumer, err)
			}
			return nil
		}
	}
	if err := servedBy(secondJS, env.js)(); err != nil {
		t.Fatal(err)
	}

	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:null}}}`, installLabel)
	if _, err := env.dyn.Resource(v1alpha1.Resource).Patch(ctx, controller, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, servedBy(env.js, secondJS))
	setEcho(t, ns, "served", "v2", "")
	eventually(t, time.Minute, func() error { return echoSynced(ctx, ns, "served", controller, "v2") })
}
