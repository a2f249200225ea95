package dispatcher

import (
	"log/slog"
	"testing"

	duckv1 "knative.dev/pkg/apis/duck/v1"

	"universalcontroller.dev/uc/core"
	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// TestDispatcherFollowsControllers: the dispatcher serves the hooks that
// have a webhook or a destination, serves a hook anew only when its spec
// changed, or for a webhook, the controller's endpoint configs, and stops
// serving the hooks of a removed controller.
func TestDispatcherFollowsControllers(t *testing.T) {
	d := &Dispatcher{log: slog.Default(), served: map[hookKey]*servedHook{}}
	url := "http://hook/sync"
	ctl := func(generation int64, sync v1alpha1.Hook, finalize *v1alpha1.Hook) *core.Controller {
		return &core.Controller{Name: "c", Generation: generation, Spec: v1alpha1.UniversalControllerSpec{Hooks: v1alpha1.ControllerHooks{Hooks: v1alpha1.Hooks{Sync: v1alpha1.SyncHook{Hook: sync}, Finalize: finalize}}}}
	}
	webhook := v1alpha1.Hook{Webhook: &v1alpha1.Webhook{URL: &url}}
	served := func() map[string]*servedHook {
		out := map[string]*servedHook{}
		for k, s := range d.served {
			out[k.hook] = s
		}
		return out
	}

	v1 := ctl(1, webhook, &v1alpha1.Hook{}) // finalize is bus-native
	d.onController(nil, v1)
	first := served()
	if len(first) != 1 || first[hooks.Sync] == nil {
		t.Fatalf("serving %v, want the sync webhook only", first)
	}

	v2 := ctl(2, webhook, &v1alpha1.Hook{Destination: &duckv1.Destination{}})
	d.onController(v1, v2)
	second := served()
	if len(second) != 2 || second[hooks.Sync] != first[hooks.Sync] || second[hooks.Finalize] == nil {
		t.Fatalf("serving %v, want the same sync webhook and a new finalize destination", second)
	}

	other := "http://other/sync"
	v3 := ctl(3, v1alpha1.Hook{Webhook: &v1alpha1.Webhook{URL: &other}}, nil)
	d.onController(v2, v3)
	third := served()
	if len(third) != 1 || third[hooks.Sync] == second[hooks.Sync] || *third[hooks.Sync].spec.Webhook.URL != other {
		t.Fatalf("serving %v, want only a new sync webhook", third)
	}

	v4 := ctl(4, v1alpha1.Hook{Webhook: &v1alpha1.Webhook{URL: &other}}, nil)
	v4.Spec.EndpointConfigs = []v1alpha1.EndpointConfig{{Host: "other"}}
	d.onController(v3, v4)
	if fourth := served(); len(fourth) != 1 || fourth[hooks.Sync] == third[hooks.Sync] {
		t.Fatalf("serving %v, want a new sync webhook for the new endpoint configs", fourth)
	}

	d.onController(v4, nil)
	if len(d.served) != 0 {
		t.Fatalf("still serving %v after the controller was removed", d.served)
	}
}
