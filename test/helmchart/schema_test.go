package helmchart

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chartutil"
)

// TestValuesRefused: values.schema.json (and the templates) refuse a typo
// in a key at any level, a value of the wrong type and a value the chart
// cannot use, as `helm install --set …` would give them, saying which.
func TestValuesRefused(t *testing.T) {
	for _, tc := range []struct {
		set, json []string
		want      string // in the error
	}{
		{set: []string{"replicaCount=x"}, want: "'replicaCount' not allowed"},
		{set: []string{"nameOverrid=ctl"}, want: "'nameOverrid' not allowed"},
		{set: []string{"watcher.replicas=x"}, want: "/watcher/replicas"},
		{set: []string{"watcher.resorces.limits.memory=1Gi"}, want: "'resorces' not allowed"},
		{set: []string{"applier.resources.limit.memory=1Gi"}, want: "'limit' not allowed"},
		{set: []string{"nats.server.replica=5"}, want: "'replica' not allowed"},
		{set: []string{"nats.server.podDisruptionBudget.minAvailabe=2"}, want: "'minAvailabe' not allowed"},
		{set: []string{"networkPolicy.enable=false"}, want: "'enable' not allowed"},
		{set: []string{"serviceAccount.nmae=x"}, want: "'nmae' not allowed"},
		{set: []string{"rbac.create=no"}, want: "/rbac/create"},
		{set: []string{"logLevel=verbose"}, want: "/logLevel"},
		{set: []string{"image.tag=2"}, want: "/image/tag"}, // --set-string image.tag=2
		{set: []string{"metrics.port=0"}, want: "/metrics/port"},
		{set: []string{"podAnnotations.note=true"}, want: "/podAnnotations/note"},
		{set: []string{"applier.podDisruptionBudget.minAvailable=half"}, want: "/applier/podDisruptionBudget/minAvailable"},
		{set: []string{"nats.server.routeAuth.password=p@ss:word"}, want: "/nats/server/routeAuth/password"},
		{set: []string{"nats.streamReplicas=7"}, want: "/nats/streamReplicas"},
		{json: []string{`watcher.extraEnv=[{"value":"debug"}]`}, want: "/watcher/extraEnv/0"},
		{json: []string{`applier.topologySpreadConstraints=[{"topologyKey":"zone"}]`}, want: "/applier/topologySpreadConstraints/0"},
		{set: []string{"applier.podDisruptionBudget.minAvailable=2", "applier.podDisruptionBudget.maxUnavailable=1"}, want: "applier.podDisruptionBudget: give minAvailable or maxUnavailable, not both"},
	} {
		name := strings.Join(append(tc.set, tc.json...), " ")
		t.Run(name, func(t *testing.T) {
			vals := setJSONValues(t, setValues(t, tc.set...), tc.json...)
			_, err := renderChart(release, vals)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("rendered with %s: err %v, want one saying %q", name, err, tc.want)
			}
		})
	}
}

// TestValuesAccepted: values of the right types, as --set gives them,
// pass the schema (a too strict schema refuses what users write).
func TestValuesAccepted(t *testing.T) {
	for _, sets := range [][]string{
		{"applier.podDisruptionBudget.maxUnavailable=50%", "watcher.podDisruptionBudget.minAvailable=0"},
		{"nats.server.resources.limits.cpu=2", "watcher.resources.requests.memory=1Gi"},
		{"image.pullPolicy=Always", "imagePullSecrets[0].name=registry"},
		{"nats.server.routeAuth.user=peer.route", "nats.server.routeAuth.password=Abc123"},
		{"serviceAccount.create=false", "rbac.create=false", "networkPolicy.enabled=false"},
		{"global.imageRegistry=example.com"},
	} {
		if _, err := renderChart(release, setValues(t, sets...)); err != nil {
			t.Errorf("--set %s: %v", strings.Join(sets, ","), err)
		}
	}
}

// chartSchema is values.schema.json.
func chartSchema(t *testing.T) map[string]any {
	t.Helper()
	b, err := os.ReadFile(chartDir + "/values.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var s map[string]any
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("values.schema.json: %v", err)
	}
	return s
}

// valuePaths are the paths of the values values.schema.json declares
// (nats.server.replicas, …): the properties of objects it declares in
// place, down to those whose type it declares by reference or leaves
// open (resources, podDisruptionBudget, nodeSelector, …), which are
// values of their own.
func valuePaths(schema map[string]any, prefix string) []string {
	var out []string
	props, _ := schema["properties"].(map[string]any)
	for k, v := range props {
		p := prefix + k
		sub, _ := v.(map[string]any)
		if _, ok := sub["properties"]; ok {
			out = append(out, valuePaths(sub, p+".")...)
		} else {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// TestSchemaMatchesValues: every value values.schema.json declares has its
// default in values.yaml (but global, Helm's), and every default of
// values.yaml is declared (the default render passing the schema says so
// too).
func TestSchemaMatchesValues(t *testing.T) {
	vals, err := chartutil.ReadValuesFile(chartDir + "/values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	declared := valuePaths(chartSchema(t), "")
	for _, p := range declared {
		if p == "global" {
			continue
		}
		if _, err := vals.PathValue(p); err != nil {
			if _, err := vals.Table(p); err != nil {
				t.Errorf("values.schema.json declares %s, values.yaml has no default for it", p)
			}
		}
	}
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			p := prefix + k
			if slices.Contains(declared, p) {
				continue
			}
			sub, ok := v.(map[string]any)
			if !ok {
				t.Errorf("values.yaml has %s, values.schema.json does not declare it", p)
				continue
			}
			walk(p+".", sub)
		}
	}
	walk("", vals)
}
