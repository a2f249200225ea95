package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/sdk/go/hook"
)

// barHook replies as the parent's spec.mode says: "good" gives one
// ConfigMap; "bad-json" is not JSON; "bad-kind" adds a Secret, a kind the
// controller does not declare; "bad-child" adds, after the ConfigMap, a
// second one whose data key the apiserver refuses; "bad-child-first" lists
// that refused ConfigMap first.
type barHook struct{}

func (barHook) Hook() string { return hooks.Sync }

func (barHook) Handle(_ context.Context, data []byte) (any, error) {
	var req hooks.SyncRequest
	if err := json.Unmarshal(data, &req); err != nil {
		return nil, err
	}
	mode, _, _ := unstructured.NestedString(req.Parent.Object, "spec", "mode")
	cm := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": req.Parent.GetName()},
		"data":     map[string]any{"mode": mode},
	}}
	switch mode {
	case "bad-json":
		return []byte(`{"children": [{"apiVersion": "v1", `), nil
	case "bad-kind":
		secret := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": req.Parent.GetName()},
		}}
		return &hooks.SyncResponse{Children: []*unstructured.Unstructured{cm, secret}}, nil
	case "bad-child", "bad-child-first":
		refused := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": req.Parent.GetName() + "-refused"},
			"data":     map[string]any{"not a valid key!": "x"},
		}}
		children := []*unstructured.Unstructured{cm, refused}
		if mode == "bad-child-first" {
			children = []*unstructured.Unstructured{refused, cm}
		}
		return &hooks.SyncResponse{Children: children}, nil
	}
	return &hooks.SyncResponse{Status: map[string]any{"mode": mode}, Children: []*unstructured.Unstructured{cm}}, nil
}

func createBar(t *testing.T, ns, name, mode string) {
	t.Helper()
	bar := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "e2e.universalcontroller.dev/v1", "kind": "Bar",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     map[string]any{"mode": mode},
	}}
	if _, err := env.dyn.Resource(barGVR).Namespace(ns).Create(t.Context(), bar, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// setBarMode sets a Bar's mode and returns its new generation.
func setBarMode(t *testing.T, ns, name, mode string) int64 {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"mode":%q}}`, mode)
	bar, err := env.dyn.Resource(barGVR).Namespace(ns).Patch(t.Context(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return bar.GetGeneration()
}

// configMapMode returns the mode in the Bar's ConfigMap and its resourceVersion.
func configMapMode(ctx context.Context, ns, name string) (string, string, error) {
	cm, err := env.kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", "", err
	}
	return cm.Data["mode"], cm.ResourceVersion, nil
}

// TestBadRepliesAreRejectedWhole: a reply that is not JSON, that holds a
// child of an undeclared kind, or a child the apiserver refuses, applies
// nothing, is reported on its parent, and does not stop other parents from
// being served.
func TestBadRepliesAreRejectedWhole(t *testing.T) {
	ctx := t.Context()
	go func() {
		if err := hook.Serve(ctx, env.js, "bar-controller", barHook{}); err != nil && ctx.Err() == nil {
			t.Errorf("bar worker: %v", err)
		}
	}()
	if err := applyFile(ctx, filepath.Join(env.root, "test/e2e/testdata/bar-controller.yaml")); err != nil {
		t.Fatal(err)
	}
	ns := namespace(t)
	createBar(t, ns, "victim", "good")
	var rv string
	eventually(t, time.Minute, func() error {
		mode, v, err := configMapMode(ctx, ns, "victim")
		if err == nil && mode != "good" {
			err = fmt.Errorf("mode %q", mode)
		}
		rv = v
		return err
	})

	for _, tc := range []struct{ mode, reason, want string }{
		{"bad-kind", "InvalidHookReply", `Secret.v1 "victim": kind not declared in childResources`},
		{"bad-json", "InvalidHookReply", "not a valid sync response"},
		// The valid update of the victim's ConfigMap comes first in the
		// reply: only the dry run of the refused create keeps it from
		// being applied.
		{"bad-child", "ApplyFailed", `ConfigMap "victim-refused" is invalid`},
		// The refused create comes first: it is written before the
		// update, alone, and its refusal stops the reply.
		{"bad-child-first", "ApplyFailed", `ConfigMap "victim-refused" is invalid`},
	} {
		gen := setBarMode(t, ns, "victim", tc.mode)
		eventually(t, time.Minute, func() error {
			// The condition is about this mode's reply, not the one before.
			if err := syncFailed(ctx, barGVR, ns, "victim", tc.reason, tc.want); err != nil {
				return err
			}
			bar, err := env.dyn.Resource(barGVR).Namespace(ns).Get(ctx, "victim", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if c := condition(bar, "Synced"); c["observedGeneration"] != gen {
				return fmt.Errorf("Synced is about generation %v, want %d", c["observedGeneration"], gen)
			}
			// A rejected reply still says which generation uc looked at.
			if got, _, _ := unstructured.NestedInt64(bar.Object, "status", "observedGeneration"); got != gen {
				return fmt.Errorf("status.observedGeneration %d, want %d", got, gen)
			}
			return nil
		})
		// Other parents keep being served.
		other := "other-" + tc.mode
		createBar(t, ns, other, "good")
		eventually(t, time.Minute, func() error {
			_, _, err := configMapMode(ctx, ns, other)
			return err
		})
		// Nothing of the bad reply was applied: the ConfigMap is untouched
		// and neither the Secret nor the refused ConfigMap exists.
		if mode, v, err := configMapMode(ctx, ns, "victim"); err != nil || mode != "good" || v != rv {
			t.Fatalf("the victim's ConfigMap changed: mode %q resourceVersion %s (was %s), err %v", mode, v, rv, err)
		}
		if _, err := env.kube.CoreV1().Secrets(ns).Get(ctx, "victim", metav1.GetOptions{}); err == nil {
			t.Fatal("a Secret from a rejected reply was created")
		}
		if _, _, err := configMapMode(ctx, ns, "victim-refused"); err == nil {
			t.Fatal("a refused ConfigMap exists")
		}
	}

	// A good reply again clears the condition.
	setBarMode(t, ns, "victim", "good")
	eventually(t, time.Minute, func() error {
		bar, err := env.dyn.Resource(barGVR).Namespace(ns).Get(ctx, "victim", metav1.GetOptions{})
		if err != nil {
			return err
		}
		return syncedTrue(bar)
	})
}
