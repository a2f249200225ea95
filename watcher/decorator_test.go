package watcher

// Golden-file tests of the decorator hook contract: Metacontroller's
// decorator request, {controller, object, attachments, related,
// finalizing}, for hook versions v1 and v2, for a namespaced object and for
// a cluster-scoped one with namespaced attachments. Regenerate with
//
//	go test ./watcher/ -run TestDecoratorRequestGolden -update

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"universalcontroller.dev/uc/core"
	"universalcontroller.dev/uc/internal/golden"
	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// fixtureDecorator is a resolved UniversalDecorator of one resource, as its
// view for that resource.
func fixtureDecorator(t testing.TB, version string, decorated core.Resource, attachments ...core.Resource) *core.Controller {
	t.Helper()
	var rules []string
	for _, a := range attachments {
		rules = append(rules, "    - {apiVersion: "+a.APIVersion()+", resource: "+a.GVR.Resource+"}")
	}
	u := obj(t, `
apiVersion: universalcontroller.dev/v1alpha1
kind: UniversalDecorator
metadata: {name: deco-`+version+`, uid: 00000000-0000-0000-0000-0000000000d1, generation: 1, resourceVersion: "100"}
spec:
  resources:
    - {apiVersion: `+decorated.APIVersion()+`, resource: `+decorated.GVR.Resource+`}
  attachments:
`+strings.Join(rules, "\n")+`
  hooks:
    sync: {version: `+version+`}
`)
	ctl := &core.Controller{Name: bus.DecoratorController("deco-" + version), Generation: 1, Object: u,
		Spec: v1alpha1.UniversalControllerSpec{Hooks: v1alpha1.ControllerHooks{Hooks: v1alpha1.Hooks{Sync: v1alpha1.SyncHook{Hook: v1alpha1.Hook{Version: v1alpha1.HookVersion(version)}}}}},
		Decorator: &core.Decoration{Name: "deco-" + version, Annotation: core.AnnotationDecorator, Resources: []core.Decorated{
			{Resource: decorated, Labels: labels.Everything(), Annotations: labels.Everything()}}}}
	for _, a := range attachments {
		ctl.Children = append(ctl.Children, core.Child{Resource: a})
	}
	return ctl.Decorating(&ctl.Decorator.Resources[0])
}

func TestDecoratorRequestGolden(t *testing.T) {
	statefulSets := resource("apps", "v1", "StatefulSet", "statefulsets", true)
	namespaces := resource("", "v1", "Namespace", "namespaces", false)
	sts := obj(t, `
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: web, namespace: team-a, uid: `+parentUID+`, generation: 2, resourceVersion: "300",
  annotations: {service-per-pod-label: pod-name}}
spec: {replicas: 2}
`)
	ns := obj(t, `
apiVersion: v1
kind: Namespace
metadata: {name: team-a, uid: `+parentUID+`, resourceVersion: "301", labels: {welcome: "yes"}}
`)
	svc := child(t, "v1", "Service", "team-a", "web-0", "spec: {selector: {pod-name: web-0}}\n")
	welcome := child(t, "v1", "ConfigMap", "team-a", "welcome", "data: {namespace: team-a}\n")
	for _, tc := range []struct {
		golden   string
		ctl      *core.Controller
		obj      *unstructured.Unstructured
		attached [][]*unstructured.Unstructured
		keys     map[string][]string
	}{
		{"decorator-request-v1-namespaced.json", fixtureDecorator(t, "v1", statefulSets, resource("", "v1", "Service", "services", true), configMaps),
			sts, [][]*unstructured.Unstructured{{svc}, nil}, map[string][]string{"Service.v1": {"web-0"}, "ConfigMap.v1": {}}},
		{"decorator-request-v2-namespaced.json", fixtureDecorator(t, "v2", statefulSets, resource("", "v1", "Service", "services", true)),
			sts, [][]*unstructured.Unstructured{{svc}}, map[string][]string{"Service.v1": {"team-a/web-0"}}},
		{"decorator-request-v1-cluster.json", fixtureDecorator(t, "v1", namespaces, configMaps, clusterRoles),
			ns, [][]*unstructured.Unstructured{{welcome}, nil}, map[string][]string{"ConfigMap.v1": {"team-a/welcome"}, "ClusterRole.rbac.authorization.k8s.io/v1": {}}},
	} {
		t.Run(strings.TrimSuffix(tc.golden, ".json"), func(t *testing.T) {
			version := tc.ctl.HookVersion(hooks.Sync)
			got := indentJSON(t, core.NewDecoratorRequest(tc.ctl, tc.obj, tc.attached, hooks.GroupedObjects{}, version, false))
			golden.Check(t, tc.golden, got)

			var wire map[string]any
			if err := json.Unmarshal(got, &wire); err != nil {
				t.Fatal(err)
			}
			if got := slices.Sorted(maps.Keys(wire)); !slices.Equal(got, []string{"attachments", "controller", "finalizing", "object", "related"}) {
				t.Errorf("request fields %v, want Metacontroller's decorator request", got)
			}
			attachments, _ := wire["attachments"].(map[string]any)
			if got, want := slices.Sorted(maps.Keys(attachments)), slices.Sorted(maps.Keys(tc.keys)); !slices.Equal(got, want) {
				t.Errorf("attachment groups %v, want every declared kind %v", got, want)
			}
			for group, want := range tc.keys {
				objs, _ := attachments[group].(map[string]any)
				if got := slices.Sorted(maps.Keys(objs)); objs == nil || !slices.Equal(got, want) {
					t.Errorf("attachments[%q] keys %v, want %v", group, got, want)
				}
			}
		})
	}
}
