package helmchart

import (
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"universalcontroller.dev/uc/schemas/crds"
	"universalcontroller.dev/uc/test/manifests"
	"universalcontroller.dev/uc/test/testbed"
)

// TestServerDryRun has the test bed's API server validate every object the
// chart renders, with its defaults, every option on, and an external NATS:
// a server-side apply with strict field validation, not persisted.
func TestServerDryRun(t *testing.T) {
	bed := testbed.New(t)
	kube, err := kubernetes.NewForConfig(bed.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	// The Prometheus Operator's CRD, for the chart's PodMonitor.
	b, err := os.ReadFile("../e2e/testdata/monitoring.coreos.com_podmonitors.yaml")
	if err != nil {
		t.Fatal(err)
	}
	podMonitors := new(apiextensionsv1.CustomResourceDefinition)
	if err := yaml.UnmarshalStrict(b, podMonitors); err != nil {
		t.Fatal(err)
	}
	if err := crds.InstallDefinitions(t.Context(), bed.RESTConfig(), podMonitors); err != nil {
		t.Fatal(err)
	}
	a, err := NewDryRunner(bed.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}

	// Objects cannot be dry-run in a namespace that does not exist.
	for _, ns := range []string{namespace, "hooks", "more-hooks"} {
		if _, err := kube.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, vs := range valueSets {
		t.Run(vs.name, func(t *testing.T) {
			m := render(t, release, vs.vals)
			for _, o := range m {
				if err := a.DryRun(t.Context(), o); err != nil {
					t.Errorf("%s %s: %v", o.GetKind(), o.GetName(), err)
				}
			}
			t.Logf("the API server accepted the chart's %d objects", len(m))
		})
	}

	// The dry run validates: a field the API does not know fails it.
	bad, err := manifests.WithMisspeltField(render(t, release, nil).Find("Deployment", "uc-applier"))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.DryRun(t.Context(), bad); err == nil || !strings.Contains(err.Error(), manifests.MisspeltField) {
		t.Errorf("a misspelt field passed the dry run (err %v)", err)
	}
}
