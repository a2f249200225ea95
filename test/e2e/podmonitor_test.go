package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"universalcontroller.dev/uc/test/manifests"
)

var podMonitorGVR = schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: "podmonitors"}

// TestPodMonitorComponent builds deploy/ with its optional component
// deploy/components/podmonitor, as an overlay of a user's would: the
// PodMonitor selects the Pods of every uc Deployment, on their port
// "metrics" over HTTPS with a token allowed to get /metrics, and not the
// NATS servers'; and the API server, given the
// Prometheus Operator's CRD, accepts it (server-side dry run, strict).
func TestPodMonitorComponent(t *testing.T) {
	overlay := t.TempDir()
	base, err := filepath.Rel(overlay, filepath.Join(env.root, "deploy")) // kustomize takes relative bases only
	if err != nil {
		t.Fatal(err)
	}
	kustomization := fmt.Sprintf("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"+
		"resources: [%s]\ncomponents: [%s/components/podmonitor]\n", base, base)
	if err := os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(kustomization), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := manifests.Kustomize(t.Context(), overlay)
	if err != nil {
		t.Fatal(err)
	}
	monitors := m.OfKind("PodMonitor")
	if len(monitors) != 1 {
		t.Fatalf("%d PodMonitors, want 1", len(monitors))
	}
	pm := monitors[0]
	matchLabels, _, _ := unstructured.NestedStringMap(pm.Object, "spec", "selector", "matchLabels")
	selector := labels.SelectorFromSet(matchLabels)
	endpoints, _, _ := unstructured.NestedSlice(pm.Object, "spec", "podMetricsEndpoints")
	if len(endpoints) != 1 || endpoints[0].(map[string]any)["port"] != "metrics" {
		t.Fatalf("podMetricsEndpoints %v, want the port metrics", endpoints)
	}
	// Over HTTPS, with the token of a ServiceAccount bound to
	// uc-metrics-reader (TestMetricsSecure scrapes uc with it).
	manifests.CheckPodMonitorAuth(t, m, pm, "uc-metrics-reader")
	deployments := m.OfKind("Deployment")
	if len(deployments) != 3 {
		t.Fatalf("%d Deployments, want uc's 3", len(deployments))
	}
	for _, d := range deployments {
		pod := manifests.Typed[appsv1.Deployment](t, m.In(d.GetNamespace()), "Deployment", d.GetName()).Spec.Template
		if pm.GetNamespace() != d.GetNamespace() || !selector.Matches(labels.Set(pod.Labels)) { // it looks in its own namespace
			t.Errorf("the PodMonitor (%s, %v) does not select the Pods of %s/%s (%v)", pm.GetNamespace(), matchLabels, d.GetNamespace(), d.GetName(), pod.Labels)
		}
		if !slices.ContainsFunc(pod.Spec.Containers[0].Ports, func(p corev1.ContainerPort) bool { return p.Name == "metrics" }) {
			t.Errorf("%s has no port metrics", d.GetName())
		}
	}
	for _, sts := range m.OfKind("StatefulSet") {
		if selector.Matches(labels.Set(manifests.Typed[appsv1.StatefulSet](t, m.In(sts.GetNamespace()), "StatefulSet", sts.GetName()).Spec.Template.Labels)) {
			t.Errorf("the PodMonitor selects the Pods of StatefulSet %s", sts.GetName())
		}
	}

	installCRD(t, "test/e2e/testdata/monitoring.coreos.com_podmonitors.yaml", podMonitorGVR)
	pm = pm.DeepCopy()
	pm.SetNamespace(namespace(t))
	y, err := yaml.Marshal(pm.Object)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := deployKubectl(t, y, "apply", "--dry-run=server", "--validate=strict", "-f", "-"); err != nil {
		t.Fatalf("server-side dry run of the PodMonitor: %v", err)
	} else {
		t.Log(out)
	}
}
