package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/schemas/v1alpha1"
	"universalcontroller.dev/uc/sdk/go/hook"
)

var grabberGVR = schema.GroupVersionResource{Group: "e2e.universalcontroller.dev", Version: "v1", Resource: "grabbers"}

// grab is a hostile hook: it asks for a ConfigMap for every name in the
// Grabber's spec.targets, whoever has one of that name.
func grab(_ context.Context, req *hooks.SyncRequest) (*hooks.SyncResponse, error) {
	targets, _, _ := unstructured.NestedStringSlice(req.Parent.Object, "spec", "targets")
	extra, _, _ := unstructured.NestedString(req.Parent.Object, "spec", "extra")
	resp := &hooks.SyncResponse{Status: map[string]any{"grabbed": int64(len(targets))}}
	for _, name := range targets {
		data := map[string]any{"grabbed-by": req.Parent.GetName()}
		if extra != "" {
			data["extra"] = extra
		}
		resp.Children = append(resp.Children, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": name}, "data": data,
		}})
	}
	return resp, nil
}

func createGrabber(t *testing.T, ns, name string, targets ...string) *unstructured.Unstructured {
	t.Helper()
	g := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "e2e.universalcontroller.dev/v1", "kind": "Grabber",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     map[string]any{"targets": toAny(targets)},
	}}
	out, err := env.dyn.Resource(grabberGVR).Namespace(ns).Create(t.Context(), g, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// patchGrabber merge-patches a Grabber's spec and returns its generation.
func patchGrabber(t *testing.T, ns, name, spec string) int64 {
	t.Helper()
	g, err := env.dyn.Resource(grabberGVR).Namespace(ns).Patch(t.Context(), name, types.MergePatchType, []byte(`{"spec":`+spec+`}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return g.GetGeneration()
}

// createConfigMap creates a ConfigMap that is not the Grabbers' and returns
// it as created.
func createConfigMap(t *testing.T, ns, name string, lbls map[string]string, owner *metav1.OwnerReference) *corev1.ConfigMap {
	t.Helper()
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: lbls},
		Data:       map[string]string{"secret": "do-not-touch"},
	}
	if owner != nil {
		cm.OwnerReferences = []metav1.OwnerReference{*owner}
	}
	out, err := env.kube.CoreV1().ConfigMaps(ns).Create(t.Context(), cm, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestHookCannotTakeOverObjects: a hook that names an existing object it
// may not adopt — controlled by no one and not matched by the parent's
// selector, controlled by another owner, or by another parent of the same
// controller, or created by someone else just before the hook's reply — gets
// its reply rejected whole, with a Warning Event and Synced=False naming the
// object, whether the reply has one child or several; the object is left
// exactly as it was. An orphan the selector matches is still adopted, and a
// field dropped from a child uc created is removed.
func TestHookCannotTakeOverObjects(t *testing.T) {
	ctx := t.Context()
	installCRD(t, "test/e2e/testdata/grabber-crd.yaml", grabberGVR)
	serveHooks(t, "grabber-controller", hook.Func(hooks.Sync, grab))
	registerManifest(t, "test/e2e/testdata/grabber-controller.yaml", nil)
	ns := namespace(t)

	// What the hook must not take over.
	victim := createConfigMap(t, ns, "victim", map[string]string{"app": "victim"}, nil)
	boss := createConfigMap(t, ns, "boss", nil, nil)
	yes := true
	bossed := createConfigMap(t, ns, "bossed", nil, &metav1.OwnerReference{
		APIVersion: "v1", Kind: "ConfigMap", Name: boss.Name, UID: boss.UID, Controller: &yes})
	createGrabber(t, ns, "first-owner", "shared")
	var shared *corev1.ConfigMap
	eventually(t, time.Minute, func() error {
		var err error
		shared, err = env.kube.CoreV1().ConfigMaps(ns).Get(ctx, "shared", metav1.GetOptions{})
		return err
	})

	for _, tc := range []struct {
		parent  string
		targets []string
		victim  *corev1.ConfigMap
		want    string
	}{
		{"one-unowned", []string{"victim"}, victim, `"victim": an object of that name exists, is controlled by no one`},
		{"many-unowned", []string{"mine-1", "victim", "mine-2"}, victim, `"victim": an object of that name exists, is controlled by no one`},
		{"unowned-first", []string{"victim", "mine-3"}, victim, `"victim": an object of that name exists, is controlled by no one`},
		{"one-bossed", []string{"bossed"}, bossed, `"bossed": an object of that name exists and is already controlled by ConfigMap boss`},
		{"many-bossed", []string{"mine-4", "bossed"}, bossed, `"bossed": an object of that name exists and is already controlled by ConfigMap boss`},
		{"one-sibling", []string{"shared"}, shared, `"shared": an object of that name exists and is already controlled by Grabber first-owner`},
		{"many-sibling", []string{"mine-5", "shared"}, shared, `"shared": an object of that name exists and is already controlled by Grabber first-owner`},
	} {
		if !t.Run("reject "+tc.parent, func(t *testing.T) {
			createGrabber(t, ns, tc.parent, tc.targets...)
			eventually(t, time.Minute, func() error {
				return syncFailed(ctx, grabberGVR, ns, tc.parent, "InvalidHookReply", tc.want)
			})
			assertUntouched(t, tc.victim)
			for _, name := range tc.targets {
				if strings.HasPrefix(name, "mine-") {
					if _, err := env.kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{}); err == nil {
						t.Errorf("%s: ConfigMap %s of a rejected reply was created", tc.parent, name)
					}
				}
			}
		}) {
			return
		}
	}

	var late *corev1.ConfigMap // created after the latecomer's last sync
	if !t.Run("a latecomer's object is not taken over", func(t *testing.T) {
		// An object created by someone else after the parent's last sync: the
		// parent asks for it in its next reply.
		createGrabber(t, ns, "latecomer")
		eventually(t, time.Minute, func() error { return grabbed(ctx, ns, "latecomer", 0) })
		late = createConfigMap(t, ns, "late", map[string]string{"app": "late"}, nil)
		patchGrabber(t, ns, "latecomer", `{"targets":["late"]}`)
		eventually(t, time.Minute, func() error {
			return syncFailed(ctx, grabberGVR, ns, "latecomer", "InvalidHookReply", `"late": an object of that name exists, is controlled by no one`)
		})
		assertUntouched(t, late)
	}) {
		return
	}

	if !t.Run("an orphan the selector matches is adopted", func(t *testing.T) {
		// An orphan the parent's selector matches is adopted.
		adopter := createGrabber(t, ns, "adopter")
		eventually(t, time.Minute, func() error { return grabbed(ctx, ns, "adopter", 0) })
		createConfigMap(t, ns, "stray", map[string]string{v1alpha1.LabelControllerUID: string(adopter.GetUID())}, nil)
		patchGrabber(t, ns, "adopter", `{"targets":["stray"]}`)
		eventually(t, time.Minute, func() error {
			cm, err := env.kube.CoreV1().ConfigMaps(ns).Get(ctx, "stray", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if ref := metav1.GetControllerOf(cm); ref == nil || ref.UID != adopter.GetUID() || cm.Data["grabbed-by"] != "adopter" {
				return fmt.Errorf("stray not adopted: owners %v, data %v", cm.OwnerReferences, cm.Data)
			}
			return nil
		})
	}) {
		return
	}

	if !t.Run("a field dropped from a child uc created is removed", func(t *testing.T) {
		// A field of a child uc created (a plain create) and then dropped from
		// the desired object is removed.
		createGrabber(t, ns, "dropper", "dropped")
		patchGrabber(t, ns, "dropper", `{"extra":"x"}`)
		eventually(t, time.Minute, func() error {
			return dataIs(ctx, ns, "dropped", map[string]string{"grabbed-by": "dropper", "extra": "x"})
		})
		patchGrabber(t, ns, "dropper", `{"extra":null}`)
		eventually(t, time.Minute, func() error { return dataIs(ctx, ns, "dropped", map[string]string{"grabbed-by": "dropper"}) })
		patchGrabber(t, ns, "dropper", `{"extra":"y"}`)
		eventually(t, time.Minute, func() error {
			return dataIs(ctx, ns, "dropped", map[string]string{"grabbed-by": "dropper", "extra": "y"})
		})
		patchGrabber(t, ns, "dropper", `{"extra":null}`)
		eventually(t, time.Minute, func() error { return dataIs(ctx, ns, "dropped", map[string]string{"grabbed-by": "dropper"}) })
	}) {
		return
	}

	t.Run("deleting the rejected parents leaves the objects they named", func(t *testing.T) {
		// Deleting the rejected parents leaves the objects they named: none of
		// them ever got a parent's ownerReference.
		for _, p := range []string{"one-unowned", "many-unowned", "latecomer"} {
			if err := env.dyn.Resource(grabberGVR).Namespace(ns).Delete(ctx, p, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		assertUntouched(t, victim)
		assertUntouched(t, late)
	})
}

// assertUntouched fails unless the ConfigMap has its resourceVersion of
// before.
func assertUntouched(t *testing.T, before *corev1.ConfigMap) {
	t.Helper()
	cm, err := env.kube.CoreV1().ConfigMaps(before.Namespace).Get(t.Context(), before.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("ConfigMap %s: %v", before.Name, err)
	}
	if cm.ResourceVersion != before.ResourceVersion {
		t.Fatalf("ConfigMap %s was changed: owners %v, labels %v, data %v", cm.Name, cm.OwnerReferences, cm.Labels, cm.Data)
	}
}

// grabbed checks that the Grabber's status reports n children and that it is Synced.
func grabbed(ctx context.Context, ns, name string, n int64) error {
	g, err := env.dyn.Resource(grabberGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if got, _, _ := unstructured.NestedInt64(g.Object, "status", "grabbed"); got != n {
		return fmt.Errorf("%s: status.grabbed %d, want %d", name, got, n)
	}
	return syncedTrue(g)
}

func dataIs(ctx context.Context, ns, name string, want map[string]string) error {
	cm, err := env.kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if fmt.Sprint(cm.Data) != fmt.Sprint(want) {
		return fmt.Errorf("ConfigMap %s data %v, want %v", name, cm.Data, want)
	}
	return nil
}
