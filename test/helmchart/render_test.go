// Package helmchart tests deploy/helm/uc, uc's Helm chart: it is lint
// clean, its defaults render the objects of the kustomize install in
// deploy/, its values do what they say, and a real API server accepts what
// it renders. The Helm library is used here only, in tests: uc itself does
// not depend on it.
package helmchart

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"universalcontroller.dev/uc/test/manifests"
)

const (
	repoRoot  = "../.."
	chartDir  = repoRoot + "/deploy/helm/uc"
	release   = "uc"        // the release name deploy/README.md installs with
	namespace = "uc-system" // and its namespace
)

// render renders the chart with vals over its defaults, as `helm template
// --include-crds` does: the templates (without NOTES.txt) and crds/.
func render(t *testing.T, releaseName string, vals map[string]any) manifests.Set {
	t.Helper()
	m, err := renderChart(releaseName, vals)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func renderChart(releaseName string, vals map[string]any) (manifests.Set, error) {
	return renderRelease(releaseName, vals, nil)
}

// renderRelease renders the chart as renderChart does: as an install, or,
// with cluster, as an upgrade whose lookup functions ask cluster, as
// `helm upgrade` has them ask the release's cluster.
func renderRelease(releaseName string, vals map[string]any, cluster engine.ClientProvider) (manifests.Set, error) {
	ch, err := loader.Load(chartDir)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", chartDir, err)
	}
	opts := chartutil.ReleaseOptions{Name: releaseName, Namespace: namespace, Revision: 1, IsInstall: true}
	if cluster != nil {
		opts = chartutil.ReleaseOptions{Name: releaseName, Namespace: namespace, Revision: 2, IsUpgrade: true}
	}
	top, err := chartutil.ToRenderValues(ch, vals, opts, chartutil.DefaultCapabilities)
	if err != nil {
		return nil, fmt.Errorf("values: %w", err)
	}
	var files map[string]string
	if cluster != nil {
		files, err = engine.RenderWithClientProvider(ch, top, cluster)
	} else {
		files, err = engine.Render(ch, top)
	}
	if err != nil {
		return nil, fmt.Errorf("render: %w", err)
	}
	var out manifests.Set
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if base := path.Base(name); base == "NOTES.txt" || strings.HasPrefix(base, "_") {
			continue
		}
		objs, err := manifests.Decode([]byte(files[name]))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out = append(out, objs...)
	}
	for _, crd := range ch.CRDObjects() {
		objs, err := manifests.Decode(crd.File.Data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", crd.Filename, err)
		}
		out = append(out, objs...)
	}
	return out, nil
}
