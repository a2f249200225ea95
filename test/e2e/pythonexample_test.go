package e2e

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// TestExamplePythonWebhook: examples/python-webhook, a Metacontroller-style
// webhook on Python's standard library, serves a parent whose CRD closes
// its status schema: the ConfigMaps follow spec, the hook's status is
// written, and uc adds nothing the schema does not declare.
func TestExamplePythonWebhook(t *testing.T) {
	ctx := t.Context()
	gvr := schema.GroupVersionResource{Group: "examples.universalcontroller.dev", Version: "v1", Resource: "greetings"}
	url := startPythonHook(t, "examples/python-webhook/sync.py")
	installCRD(t, "examples/python-webhook/crd.yaml", gvr)
	registerManifest(t, "examples/python-webhook/controller.yaml", func(u *unstructured.Unstructured) {
		if err := unstructured.SetNestedField(u.Object, url, "spec", "hooks", "sync", "webhook", "url"); err != nil {
			t.Fatal(err)
		}
	})
	ns := namespace(t)
	greeting := manifestObject(t, "examples/python-webhook/greeting.yaml")
	if _, err := env.dyn.Resource(gvr).Namespace(ns).Create(ctx, greeting, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	converged := func(copies int64, who string) func() error {
		return func() error {
			g, err := env.dyn.Resource(gvr).Namespace(ns).Get(ctx, "hello", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if status, _, _ := unstructured.NestedMap(g.Object, "status"); fmt.Sprint(status) != fmt.Sprint(map[string]any{"copies": copies}) {
				return fmt.Errorf("status %v, want only copies %d", status, copies)
			}
			for i := range copies {
				cm, err := env.kube.CoreV1().ConfigMaps(ns).Get(ctx, fmt.Sprintf("hello-%d", i), metav1.GetOptions{})
				if err != nil {
					return err
				}
				if want := "Hello, " + who + "!"; cm.Data["greeting"] != want {
					return fmt.Errorf("%s says %q, want %q", cm.Name, cm.Data["greeting"], want)
				}
			}
			if _, err := env.kube.CoreV1().ConfigMaps(ns).Get(ctx, fmt.Sprintf("hello-%d", copies), metav1.GetOptions{}); err == nil {
				return fmt.Errorf("hello-%d still exists", copies)
			}
			return nil
		}
	}
	eventually(t, time.Minute, converged(2, "uc"))
	if _, err := env.dyn.Resource(gvr).Namespace(ns).Patch(ctx, "hello", types.MergePatchType, []byte(`{"spec":{"who":"Python","copies":1}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, converged(1, "Python"))
}
