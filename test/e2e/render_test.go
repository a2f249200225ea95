package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"

	"universalcontroller.dev/uc/internal/render"
)

// TestRenderKubeconfig: uc render --kubeconfig reads a parent's children
// from the cluster and plans exactly what the applier did: nothing to do
// for the reply uc applied, an update with its diff for a changed
// parent — and writes nothing.
func TestRenderKubeconfig(t *testing.T) {
	ctx := t.Context()
	dir := "examples/python-worker"
	gvr, ns := runExecExample(t, dir, "websites", "website.yaml", "website-controller", "python3", "hook.py")
	eventually(t, 2*time.Minute, func() error {
		site, err := env.dyn.Resource(gvr).Namespace(ns).Get(ctx, "hello", metav1.GetOptions{})
		if err != nil {
			return err
		}
		return syncedTrue(site)
	})
	before, err := env.kube.CoreV1().ConfigMaps(ns).Get(ctx, "hello", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	parent := manifestObject(t, dir+"/website.yaml") // without its UID: render takes the live one's
	parent.SetNamespace(ns)
	renderParent := func(message string) render.Result {
		t.Helper()
		if err := unstructured.SetNestedField(parent.Object, message, "spec", "message"); err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(t.TempDir(), "website.json")
		b, err := json.Marshal(parent.Object)
		if err == nil {
			err = os.WriteFile(file, b, 0o600)
		}
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.CommandContext(ctx, env.uc.bin, "render", "-o", "json", "--kubeconfig", env.bed.Kubeconfig(),
			"--controller", filepath.Join(env.root, dir, "controller.yaml"), "--parent", file,
			"--exec", "python3 "+filepath.Join(env.root, dir, "hook.py"))
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("uc render: %v\n%s", err, stderr.String())
		}
		var r render.Result
		if err := json.Unmarshal(out, &r); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		return r
	}
	plan := func(r render.Result) string {
		var steps []string
		for _, s := range r.Plan {
			steps = append(steps, s.Action+" "+s.Kind+" "+s.Name)
		}
		return strings.Join(steps, ", ")
	}

	r := renderParent("Hello from a Python hook")
	if got := plan(r); got != "unchanged ConfigMap.v1 hello, unchanged Deployment.apps/v1 hello" {
		t.Errorf("the plan of the reply uc applied is %s, want nothing to do", got)
	}
	r = renderParent("Edited offline")
	if got := plan(r); got != "update ConfigMap.v1 hello, unchanged Deployment.apps/v1 hello" {
		t.Errorf("the plan of an edited parent is %s, want the page updated", got)
	}
	if d := r.Plan[0].Diff; !strings.Contains(d, "-    <h1>Hello from a Python hook</h1>") || !strings.Contains(d, "+    <h1>Edited offline</h1>") {
		t.Errorf("the update's diff:\n%s", d)
	}
	after, err := env.kube.CoreV1().ConfigMaps(ns).Get(ctx, "hello", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if after.ResourceVersion != before.ResourceVersion || after.Data["index.html"] != before.Data["index.html"] {
		t.Errorf("the ConfigMap changed: %s → %s, %q", before.ResourceVersion, after.ResourceVersion, after.Data["index.html"])
	}
}

// TestRenderOfflineMapper: every built-in resource of the test bed's
// apiserver that client-go knows resolves offline to its kind and scope.
func TestRenderOfflineMapper(t *testing.T) {
	m, err := render.OfflineMapper(nil)
	if err != nil {
		t.Fatal(err)
	}
	_, lists, err := env.kube.Discovery().ServerGroupsAndResources()
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, list := range lists {
		gv, err := schema.ParseGroupVersion(list.GroupVersion)
		if err != nil {
			t.Fatal(err)
		}
		if !scheme.Scheme.IsVersionRegistered(gv) {
			continue // a custom resource's group
		}
		for _, res := range list.APIResources {
			if strings.Contains(res.Name, "/") {
				continue // a subresource
			}
			gvr := gv.WithResource(res.Name)
			gvk, err := m.KindFor(gvr)
			if err != nil {
				t.Errorf("%s: %v", gvr, err)
				continue
			}
			mapping, err := m.RESTMapping(gvk.GroupKind(), gvk.Version)
			if err != nil {
				t.Errorf("%s: %v", gvr, err)
				continue
			}
			namespaced := mapping.Scope.Name() == meta.RESTScopeNameNamespace
			if gvk.Kind != res.Kind || namespaced != res.Namespaced {
				t.Errorf("%s: offline %s, namespaced %t; the apiserver says %s, namespaced %t", gvr, gvk.Kind, namespaced, res.Kind, res.Namespaced)
			}
			checked++
		}
	}
	if checked < 40 {
		t.Fatalf("only %d built-in resources checked", checked)
	}
	t.Logf("%d built-in resources resolve offline as the apiserver serves them", checked)
}
