package finalizecleanup

import (
	"context"
	"testing"

	"universalcontroller.dev/uc/examples/internal/exampletest"
	"universalcontroller.dev/uc/sdk/go/hook"
)

// mapStore is a registry in memory; stuck entries survive a Delete.
type mapStore struct {
	entries map[string]string
	stuck   bool
}

func (m *mapStore) Put(_ context.Context, k, v string) error { m.entries[k] = v; return nil }
func (m *mapStore) Delete(_ context.Context, k string) error {
	if !m.stuck {
		delete(m.entries, k)
	}
	return nil
}
func (m *mapStore) Has(_ context.Context, k string) (bool, error) {
	_, ok := m.entries[k]
	return ok, nil
}

func TestHooks(t *testing.T) {
	store := &mapStore{entries: map[string]string{}}
	h := &Hooks{Store: store, RetryAfterSeconds: 2}
	req := &hook.SyncRequest{Parent: hook.Object{
		"metadata": map[string]any{"name": "r", "namespace": "ns"},
		"spec":     map[string]any{"value": "v"},
	}}
	resp, err := h.Sync(t.Context(), req)
	if err != nil || store.entries["ns.r"] != "v" || len(resp.Children) != 1 || resp.Children[0].(hook.Object).GetName() != "r-registration" {
		t.Fatalf("sync: %v, registry %v, reply %+v", err, store.entries, resp)
	}

	store.stuck = true
	resp, err = h.Finalize(t.Context(), req)
	if err != nil || resp.Finalized || resp.ResyncAfterSeconds != 2 || len(resp.Children) != 1 {
		t.Fatalf("finalize with the entry stuck: %v, %+v; want not finalized, the ConfigMap kept, a retry", err, resp)
	}
	if phase := resp.Children[0].(hook.Object)["data"].(map[string]any)["phase"]; phase != "Finalizing" {
		t.Errorf("phase %q while finalizing", phase)
	}

	store.stuck = false
	resp, err = h.Finalize(t.Context(), req)
	if err != nil || !resp.Finalized || len(store.entries) != 0 {
		t.Fatalf("finalize: %v, %+v, registry %v; want finalized and the entry gone", err, resp, store.entries)
	}
}

func TestManifests(t *testing.T) {
	crd, uc := exampletest.Manifests(t, CRD, ControllerManifest)
	if crd.Spec.Group != GVR.Group || crd.Spec.Names.Plural != GVR.Resource {
		t.Errorf("crd.yaml is not %s", GVR)
	}
	if uc.Name != Controller || uc.Spec.Hooks.Finalize == nil {
		t.Errorf("controller.yaml registers %s, finalize hook %v", uc.Name, uc.Spec.Hooks.Finalize)
	}
}
