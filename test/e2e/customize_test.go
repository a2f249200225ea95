package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	propagation "universalcontroller.dev/uc/examples/configmap-propagation"
	"universalcontroller.dev/uc/sdk/go/hook"
)

var propagationGVR = schema.GroupVersionResource{Group: "examples.universalcontroller.dev", Version: "v1", Resource: "configmappropagations"}

// TestConfigMapPropagation: the customize hook names a related ConfigMap in
// another namespace; it arrives in the sync request, and a change to it
// re-syncs the parent. Customize is called once per parent generation. A
// customize reply with both names and labelSelector is rejected on the
// parent.
func TestConfigMapPropagation(t *testing.T) {
	ctx := t.Context()
	var customizeCalls atomic.Int32
	customize := func(ctx context.Context, req *hook.CustomizeRequest) (*hook.CustomizeResponse, error) {
		customizeCalls.Add(1)
		resp, err := propagation.Customize(ctx, req)
		if req.Parent.GetName() == "bad" {
			resp.RelatedResources[0].LabelSelector = &hook.LabelSelector{MatchLabels: map[string]string{"a": "b"}}
		}
		return resp, err
	}
	for _, h := range []hook.Handler{hook.Customize(customize), hook.Sync(propagation.Sync)} {
		go func() {
			if err := hook.Serve(ctx, env.js, propagation.Controller, h); err != nil && ctx.Err() == nil {
				t.Errorf("worker: %v", err)
			}
		}()
	}
	dir := filepath.Join(env.root, "examples/configmap-propagation")
	for _, f := range []string{"crd.yaml", "controller.yaml"} {
		if err := applyFile(ctx, filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	source := namespace(t)
	targets := []string{extraNamespace(t, source+"-a"), extraNamespace(t, source+"-b")}
	if _, err := env.kube.CoreV1().ConfigMaps(source).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "settings"}, Data: map[string]string{"level": "1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "examples.universalcontroller.dev/v1", "kind": "ConfigMapPropagation",
		"metadata": map[string]any{"name": source},
		"spec":     map[string]any{"sourceName": "settings", "sourceNamespace": source, "targetNamespaces": []any{targets[0], targets[1]}},
	}}
	createClusterScoped(t, propagationGVR, p)
	copiesAt := func(level string) func() error {
		return func() error {
			for _, ns := range targets {
				cm, err := env.kube.CoreV1().ConfigMaps(ns).Get(ctx, "settings", metav1.GetOptions{})
				if err != nil {
					return err
				}
				if cm.Data["level"] != level {
					return fmt.Errorf("copy in %s has level %q, want %q", ns, cm.Data["level"], level)
				}
			}
			return nil
		}
	}
	eventually(t, time.Minute, copiesAt("1"))
	calls := customizeCalls.Load()

	// A change to the related source re-syncs the parent; customize is not
	// called again for the same generation.
	if _, err := env.kube.CoreV1().ConfigMaps(source).Update(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "settings"}, Data: map[string]string{"level": "2"}}, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, copiesAt("2"))
	if got := customizeCalls.Load(); got != calls {
		t.Errorf("customize was called %d more times for the same generation", got-calls)
	}
	t.Logf("customize calls: %d for one parent generation", calls)

	// Both names and labelSelector: rejected on the parent.
	bad := p.DeepCopy()
	bad.SetName("bad")
	createClusterScoped(t, propagationGVR, bad)
	eventually(t, time.Minute, func() error {
		obj, err := env.dyn.Resource(propagationGVR).Get(ctx, "bad", metav1.GetOptions{})
		if err != nil {
			return err
		}
		c := condition(obj, "Synced")
		if c == nil || c["reason"] != "InvalidHookReply" || !strings.Contains(fmt.Sprint(c["message"]), "both names and labelSelector") {
			return fmt.Errorf("Synced condition is %v", c)
		}
		return nil
	})
}
