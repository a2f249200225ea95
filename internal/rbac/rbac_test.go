package rbac

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"universalcontroller.dev/uc/core"
	"universalcontroller.dev/uc/internal/golden"
	"universalcontroller.dev/uc/internal/render"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// controller reads the controller object of a testdata file, its
// resources resolved with the Foo CRD and Kubernetes' built-in kinds.
func controller(t *testing.T, file string) *core.Controller {
	t.Helper()
	objs, err := render.ReadManifests("testdata/foo-crd.yaml", "testdata/"+file)
	if err != nil {
		t.Fatal(err)
	}
	crds, rest := render.SplitCRDs(objs)
	mapper, err := render.OfflineMapper(crds)
	if err != nil {
		t.Fatal(err)
	}
	ctl, err := core.ControllerOf(rest[0], func(r v1alpha1.ResourceRule) (core.Resource, error) { return resolvePlural(mapper, r, false) },
		func(core.Resource) (bool, error) { return false, nil })
	if err != nil {
		t.Fatal(err)
	}
	return ctl
}

// access is a role's verb on a resource, in a namespace on a name, or
// anywhere.
type access struct {
	role                            Role
	verb, group, resource, ns, name string
}

// allows tells whether the grants allow a, as RBAC would.
func allows(grants []Grant, a access) bool {
	return slices.ContainsFunc(grants, func(g Grant) bool {
		return g.Role == a.role && g.Group == a.group && g.Resource == a.resource && slices.Contains(g.Verbs, a.verb) &&
			(g.Namespace == "" || g.Namespace == a.ns) && (len(g.Names) == 0 || slices.Contains(g.Names, a.name))
	})
}

// TestNeeds: what each role may do with each controller's kinds, as the
// code of the roles does it, and what it may not.
func TestNeeds(t *testing.T) {
	const sample = "samplecontroller.k8s.io"
	for _, tc := range []struct {
		file          string
		opts          Options
		allowed, more []access // allowed; not allowed
	}{
		{file: "../../../examples/foo/controller.yaml",
			allowed: []access{
				{role: Watcher, verb: "list", group: sample, resource: "foos"}, {role: Watcher, verb: "watch", group: "apps", resource: "deployments"},
				{role: Dispatcher, verb: "watch", group: sample, resource: "foos"}, {role: Dispatcher, verb: "list", group: "apps", resource: "deployments"},
				{role: Applier, verb: "get", group: sample, resource: "foos"}, {role: Applier, verb: "watch", group: sample, resource: "foos"},
				{role: Applier, verb: "patch", group: sample, resource: "foos/status"}, {role: Applier, verb: "update", group: sample, resource: "foos/finalizers"},
				{role: Applier, verb: "create", group: "apps", resource: "deployments"}, {role: Applier, verb: "patch", group: "apps", resource: "deployments"},
				{role: Applier, verb: "delete", group: "apps", resource: "deployments"}, {role: Applier, verb: "get", group: "apps", resource: "deployments"},
			},
			more: []access{
				{role: Watcher, verb: "get", group: sample, resource: "foos"}, {role: Watcher, verb: "patch", group: "apps", resource: "deployments"},
				{role: Dispatcher, verb: "patch", group: sample, resource: "foos/status"}, {role: Dispatcher, verb: "get", resource: "secrets", ns: "default", name: "x"},
				// No finalize hook, no sharded watchers: the parents are not patched.
				{role: Applier, verb: "patch", group: sample, resource: "foos"},
				{role: Applier, verb: "delete", group: sample, resource: "foos"}, {role: Applier, verb: "create", group: sample, resource: "foos"},
				{role: Applier, verb: "update", group: "apps", resource: "deployments"},
			}},
		{file: "../../../examples/foo/controller.yaml", opts: Options{ShardWatchers: true},
			allowed: []access{{role: Applier, verb: "patch", group: sample, resource: "foos"}}},
		{file: "hooks-controller.yaml", opts: Options{Related: []schema.GroupResource{{Group: "apps", Resource: "deployments"}}},
			allowed: []access{
				{role: Applier, verb: "patch", group: sample, resource: "foos"}, // the finalizer
				{role: Applier, verb: "create", resource: "configmaps", ns: "x"}, {role: Applier, verb: "delete", group: "apps", resource: "statefulsets"},
				{role: Watcher, verb: "watch", group: "apps", resource: "deployments"},
				{role: Dispatcher, verb: "watch", group: "serving.knative.dev", resource: "services"},
				{role: Dispatcher, verb: "get", resource: "secrets", ns: "hooks", name: "sync-token"},
				{role: Dispatcher, verb: "get", resource: "configmaps", ns: "hooks", name: "hooks-ca"},
				{role: Dispatcher, verb: "get", resource: "secrets", ns: "shared", name: "other-login"},
			},
			more: []access{
				{role: Applier, verb: "list", group: "apps", resource: "deployments"}, {role: Dispatcher, verb: "list", group: "apps", resource: "deployments"},
				{role: Dispatcher, verb: "get", resource: "secrets", ns: "hooks", name: "other-login"},
				{role: Dispatcher, verb: "get", resource: "secrets", ns: "other", name: "sync-token"},
				{role: Dispatcher, verb: "list", resource: "secrets", ns: "hooks"},
				// An endpoint config no webhook is called with reads nothing.
				{role: Dispatcher, verb: "get", resource: "secrets", ns: "shared", name: "unused-cert"},
				{role: Watcher, verb: "get", resource: "secrets", ns: "hooks", name: "sync-token"},
				{role: Dispatcher, verb: "watch", resource: "services"},
			}},
		{file: "decorator.yaml",
			allowed: []access{
				{role: Watcher, verb: "watch", group: "apps", resource: "statefulsets"}, {role: Watcher, verb: "list", resource: "services"},
				{role: Applier, verb: "patch", group: "apps", resource: "statefulsets"}, {role: Applier, verb: "patch", group: "apps", resource: "statefulsets/status"},
				{role: Applier, verb: "update", group: "apps", resource: "statefulsets/finalizers"},
				{role: Applier, verb: "create", resource: "services"}, {role: Applier, verb: "delete", resource: "services"},
			},
			more: []access{
				{role: Applier, verb: "delete", group: "apps", resource: "statefulsets"}, {role: Applier, verb: "create", group: "apps", resource: "statefulsets"},
				{role: Watcher, verb: "patch", group: "apps", resource: "statefulsets"},
			}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			grants, err := Needs(controller(t, tc.file), tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range tc.allowed {
				if !allows(grants, a) {
					t.Errorf("%+v: not allowed, want allowed", a)
				}
			}
			for _, a := range tc.more {
				if allows(grants, a) {
					t.Errorf("%+v: allowed, want not", a)
				}
			}
		})
	}
}

// TestGenerate: uc rbac's output, as recorded in testdata/ (go test
// ./internal/rbac -update records it), and its errors, each naming what
// it cannot resolve.
func TestGenerate(t *testing.T) {
	generate := func(in Input) (string, error) {
		in.Dispatcher = types.NamespacedName{Namespace: "uc-system", Name: "uc-dispatcher"}
		in.Command = "uc rbac"
		var out bytes.Buffer
		err := Generate(context.Background(), in, &out)
		return out.String(), err
	}
	out, err := generate(Input{Paths: []string{"testdata/hooks-controller.yaml", "testdata/foo-crd.yaml", "testdata/decorator.yaml"}, Related: []string{"core/configmaps"}})
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "hooks-rbac.yaml", []byte(out))

	for _, tc := range []struct {
		name string
		in   Input
		want string
	}{
		{"no CRD", Input{Paths: []string{"testdata/hooks-controller.yaml"}}, "samplecontroller.k8s.io/v1alpha1, Resource=foos: give its CustomResourceDefinition"},
		{"an unknown related resource", Input{Paths: []string{"testdata/decorator.yaml"}, Related: []string{"example.com/widgets"}}, `--related "example.com/widgets"`},
		{"a related resource in a wrong form", Input{Paths: []string{"testdata/decorator.yaml"}, Related: []string{"apps/v1/deployments"}}, "want GROUP/RESOURCE"},
		{"a singular", Input{Paths: []string{"testdata/singular.yaml"}}, `write "deployments"`},
		{"a destination without apiVersion", Input{Paths: []string{"testdata/destination-kind-only.yaml"}}, "hooks.sync.destination.ref: apiVersion"},
		{"no controller", Input{Paths: []string{"testdata/foo-crd.yaml"}}, "no controller object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := generate(tc.in); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
}
