package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/schemas/v1alpha1"
	"universalcontroller.dev/uc/sdk/go/hook"
)

// TestRelatedV2AcrossNamespaces: as in Metacontroller's configmap-list-v2
// and namespace-list-v2 examples, a namespaced parent's v2 customize hook
// relates ConfigMaps of every namespace (a rule without a namespace) and
// Namespaces themselves (a cluster-scoped kind); the sync request carries
// them, keyed ns/name, and a new one re-syncs the parent, also after the
// controller was edited.
func TestRelatedV2AcrossNamespaces(t *testing.T) {
	ctx := t.Context()
	const controller = "related-v2"
	const label = "e2e.universalcontroller.dev/related"
	selected := &metav1.LabelSelector{MatchLabels: map[string]string{label: "yes"}}
	customize := func(context.Context, *hooks.CustomizeRequest) (*hooks.CustomizeResponse, error) {
		return &hooks.CustomizeResponse{RelatedResources: []hooks.RelatedResourceRule{
			{APIVersion: "v1", Resource: "configmaps", LabelSelector: selected},
			{APIVersion: "v1", Resource: "namespaces", LabelSelector: selected},
		}}, nil
	}
	sync := func(_ context.Context, req *hooks.SyncRequest) (*hooks.SyncResponse, error) {
		list := func(group string) string {
			keys := []string{}
			for k := range req.Related[group] {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			return strings.Join(keys, ",")
		}
		cm := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": req.Parent.GetName()},
			"data": map[string]any{"configmaps": list("ConfigMap.v1"), "namespaces": list("Namespace.v1")},
		}}
		return &hooks.SyncResponse{Children: []*unstructured.Unstructured{cm}}, nil
	}
	serveHooks(t, controller, hook.Func(hooks.Customize, customize), hook.Func(hooks.Sync, sync))
	registerEchoControllerHooks(t, controller, v1alpha1.Hooks{
		Sync:      v1alpha1.SyncHook{Hook: v1alpha1.Hook{Version: v1alpha1.HookV2}},
		Customize: &v1alpha1.Hook{Version: v1alpha1.HookV2},
	})

	ns := namespace(t)
	other := extraNamespace(t, ns+"-other")
	for _, n := range []string{ns, other} {
		if _, err := env.kube.CoreV1().ConfigMaps(n).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "source", Labels: map[string]string{label: "yes"}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	createEcho(t, ns, "lister", controller, "", "")
	listed := func(configmaps, namespaces string) func() error {
		return func() error {
			cm, err := env.kube.CoreV1().ConfigMaps(ns).Get(ctx, "lister", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if cm.Data["configmaps"] != configmaps || cm.Data["namespaces"] != namespaces {
				return fmt.Errorf("the child lists configmaps %q and namespaces %q, want %q and %q", cm.Data["configmaps"], cm.Data["namespaces"], configmaps, namespaces)
			}
			return nil
		}
	}
	sources := []string{ns + "/source", other + "/source"}
	slices.Sort(sources)
	eventually(t, time.Minute, listed(strings.Join(sources, ","), ""))
	// Labelling a namespace relates it, and re-syncs the parent.
	if _, err := env.kube.CoreV1().Namespaces().Patch(ctx, other, types.MergePatchType,
		[]byte(fmt.Sprintf(`{"metadata":{"labels":{%q:"yes"}}}`, label)), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, listed(strings.Join(sources, ","), other))

	// An edit of the controller (a new generation, registered anew) keeps
	// the related objects in its requests and their changes re-syncing
	// the parent: the customize hook is asked again, its related
	// resources watched again.
	patch := []byte(`{"spec":{"resyncPeriodSeconds":3600}}`)
	edited, err := env.dyn.Resource(v1alpha1.Resource).Patch(ctx, controller, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, func() error {
		uc, err := env.dyn.Resource(v1alpha1.Resource).Get(ctx, controller, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got, _, _ := unstructured.NestedInt64(uc.Object, "status", "observedGeneration"); got != edited.GetGeneration() {
			return fmt.Errorf("the controller's status.observedGeneration is %d, want %d", got, edited.GetGeneration())
		}
		return nil
	})
	if _, err := env.kube.CoreV1().ConfigMaps(other).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "source-2", Labels: map[string]string{label: "yes"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sources = append(sources, other+"/source-2")
	slices.Sort(sources)
	eventually(t, time.Minute, listed(strings.Join(sources, ","), other))
}
