package deploy

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"universalcontroller.dev/uc/test/testbed"
)

// dashboardPanel is what TestDashboard reads of a Grafana panel.
type dashboardPanel struct {
	Type    string           `json:"type"`
	Title   string           `json:"title"`
	Panels  []dashboardPanel `json:"panels"` // a collapsed row's
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
}

// metricName finds the metrics a PromQL expression or a Grafana variable's
// query names: uc's, the work queues', the Go runtime's and the process'.
var metricName = regexp.MustCompile(`\b(?:uc|workqueue|go|process)_[a-z0-9_]+\b`)

// TestDashboard parses deploy/grafana/uc-dashboard.json: every panel but a
// row queries something, every metric it names (a histogram's _bucket,
// _sum or _count of one) is in the README's table of metrics — which
// TestMetricsDocumented checks uc serves —, and every metric of the table
// is on the dashboard.
func TestDashboard(t *testing.T) {
	b, err := os.ReadFile("grafana/uc-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		UID        string           `json:"uid"`
		Panels     []dashboardPanel `json:"panels"`
		Templating struct {
			List []struct {
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("uc-dashboard.json: %v", err)
	}
	documented, err := testbed.DocumentedMetrics("../docs/operating.md")
	if err != nil {
		t.Fatal(err)
	}
	queries := map[string][]string{} // by where: a panel's title, or "variables"
	var walk func([]dashboardPanel)
	walk = func(panels []dashboardPanel) {
		for _, p := range panels {
			walk(p.Panels)
			if p.Type == "row" {
				continue
			}
			if len(p.Targets) == 0 {
				t.Errorf("panel %q queries nothing", p.Title)
			}
			for _, target := range p.Targets {
				queries[p.Title] = append(queries[p.Title], target.Expr)
			}
		}
	}
	walk(dash.Panels)
	for _, v := range dash.Templating.List {
		queries["variables"] = append(queries["variables"], v.Definition)
	}
	used := map[string]bool{}
	for where, exprs := range queries {
		for _, expr := range exprs {
			names := metricName.FindAllString(expr, -1)
			if len(names) == 0 && where != "variables" {
				t.Errorf("panel %q: %q names no metric", where, expr)
			}
			for _, name := range names {
				metric := documentedMetric(documented, name)
				if metric == "" {
					t.Errorf("panel %q: %s is not a metric of the README's table", where, name)
				}
				used[metric] = true
			}
		}
	}
	for _, name := range documented {
		if !used[name] {
			t.Errorf("%s, in the README's table of metrics, is on no panel of the dashboard", name)
		}
	}
	if dash.UID == "" {
		t.Error("the dashboard has no uid: each import would make another copy")
	}
}

// documentedMetric is the metric of the table that name is, or is a
// histogram series of; "" if none.
func documentedMetric(documented []string, name string) string {
	for _, suffix := range []string{"", "_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && slices.Contains(documented, base) {
			return base
		}
	}
	return ""
}
