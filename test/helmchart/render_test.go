package helmchart

import (
	"fmt"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
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
	return Render(ch, releaseName, namespace, vals, cluster)
}
