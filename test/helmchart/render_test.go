// Package helmchart tests deploy/helm/uc, uc's Helm chart: it is lint
// clean, its defaults render the objects of the kustomize install in
// deploy/, its values do what they say, and a real API server accepts what
// it renders. The Helm library is used here only, in tests: uc itself does
// not depend on it.
package helmchart

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os/exec"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"universalcontroller.dev/uc/test/testbed"
)

const (
	repoRoot  = "../.."
	chartDir  = repoRoot + "/deploy/helm/uc"
	release   = "uc"        // the release name deploy/README.md installs with
	namespace = "uc-system" // and its namespace
)

// roles are uc's roles, each a Deployment <fullname>-<role>.
var roles = []string{"watcher", "dispatcher", "applier"}

// manifests are the objects a chart or kustomization renders.
type manifests []*unstructured.Unstructured

// render renders the chart with vals over its defaults, as `helm template
// --include-crds` does: the templates (without NOTES.txt) and crds/.
func render(t *testing.T, releaseName string, vals map[string]any) manifests {
	t.Helper()
	m, err := renderChart(releaseName, vals)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func renderChart(releaseName string, vals map[string]any) (manifests, error) {
	ch, err := loader.Load(chartDir)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", chartDir, err)
	}
	top, err := chartutil.ToRenderValues(ch, vals, chartutil.ReleaseOptions{
		Name: releaseName, Namespace: namespace, Revision: 1, IsInstall: true,
	}, chartutil.DefaultCapabilities)
	if err != nil {
		return nil, fmt.Errorf("values: %w", err)
	}
	files, err := engine.Render(ch, top)
	if err != nil {
		return nil, fmt.Errorf("render: %w", err)
	}
	var out manifests
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if base := path.Base(name); base == "NOTES.txt" || strings.HasPrefix(base, "_") {
			continue
		}
		objs, err := decode([]byte(files[name]))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out = append(out, objs...)
	}
	for _, crd := range ch.CRDObjects() {
		objs, err := decode(crd.File.Data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", crd.Filename, err)
		}
		out = append(out, objs...)
	}
	return out, nil
}

// kustomize is what `kubectl kustomize deploy` prints, with the test bed's
// kubectl (make testbed-bins).
func kustomize(t *testing.T) manifests {
	t.Helper()
	kubectl := testbed.CachedBin("kubectl")
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, kubectl, "kustomize", "deploy")
	cmd.Dir = repoRoot
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl kustomize deploy (make testbed-bins builds %s): %v\n%s", kubectl, err, stderr.String())
	}
	m, err := decode(out)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func decode(b []byte) (manifests, error) {
	var objs manifests
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	for {
		var obj unstructured.Unstructured
		if err := dec.Decode(&obj.Object); errors.Is(err, io.EOF) {
			return objs, nil
		} else if err != nil {
			return nil, err
		}
		if obj.Object != nil {
			objs = append(objs, &obj)
		}
	}
}

func (m manifests) find(kind, name string) *unstructured.Unstructured {
	for _, o := range m {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}

func (m manifests) ofKind(kind string) manifests {
	var out manifests
	for _, o := range m {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

// typed converts the object kind/name into its Go type, failing t if there
// is none.
func typed[T any](t *testing.T, m manifests, kind, name string) *T {
	t.Helper()
	u := m.find(kind, name)
	if u == nil {
		t.Fatalf("no %s %s", kind, name)
	}
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
		t.Fatalf("%s %s: %v", kind, name, err)
	}
	return out
}
