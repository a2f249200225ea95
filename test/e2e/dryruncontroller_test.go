package e2e

// spec.dryRun (issue 17, §5): a dry-run controller's whole pipeline runs,
// its applier publishes each plan on the bus, and nothing is written to
// the cluster.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	sjs "github.com/santhosh-tekuri/jsonschema/v6"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"universalcontroller.dev/uc/internal/inspect"
	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/schemas/jsonschema"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// namespaceState is the resourceVersion of every object in a namespace,
// of every resource that can be listed there, by "<resource> <name>".
func namespaceState(ctx context.Context, ns string) (map[string]string, error) {
	lists, err := env.kube.Discovery().ServerPreferredNamespacedResources()
	if err != nil {
		return nil, err
	}
	state := map[string]string{}
	for _, list := range lists {
		gv, err := schema.ParseGroupVersion(list.GroupVersion)
		if err != nil {
			return nil, err
		}
		for _, r := range list.APIResources {
			if !slices.Contains(r.Verbs, "list") || strings.Contains(r.Name, "/") {
				continue
			}
			objs, err := env.dyn.Resource(gv.WithResource(r.Name)).Namespace(ns).List(ctx, metav1.ListOptions{})
			if apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("list %s: %w", r.Name, err)
			}
			for _, o := range objs.Items {
				state[r.Name+" "+o.GetName()] = o.GetResourceVersion()
			}
		}
	}
	return state, nil
}

// lastPlan reads the last plan of the parent's sync replies from UC_PLANS.
func lastPlan(ctx context.Context, controller string, uid types.UID) (*bus.Plan, []byte, error) {
	s, err := env.js.Stream(ctx, bus.PlanStream)
	if err != nil {
		return nil, nil, err
	}
	raw, err := s.GetLastMsgForSubject(ctx, bus.ParentSubjects(bus.PlanPrefix, controller, hooks.Sync, uid))
	if err != nil {
		return nil, nil, err
	}
	e, err := bus.FromMsg(ctx, raw.Subject, raw.Header, raw.Data)
	if err != nil {
		return nil, nil, err
	}
	if e.Type() != bus.PlanType {
		return nil, nil, fmt.Errorf("a %s on %s", e.Type(), raw.Subject)
	}
	var p bus.Plan
	if err := json.Unmarshal(e.Data(), &p); err != nil {
		return nil, nil, err
	}
	return &p, e.Data(), nil
}

// planSchema compiles the JSON Schema of plans.
func planSchema(t *testing.T) *sjs.Schema {
	t.Helper()
	doc, _ := jsonschema.For(bus.PlanType)
	v, err := sjs.UnmarshalJSON(strings.NewReader(string(doc)))
	if err != nil {
		t.Fatal(err)
	}
	c := sjs.NewCompiler()
	if err := c.AddResource("plan.json", v); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("plan.json")
	if err != nil {
		t.Fatal(err)
	}
	return sch
}

// childConfigMap creates a ConfigMap labelled app=<app>, controlled by
// owner unless it is nil.
func childConfigMap(t *testing.T, ns, name, app, v string, owner *unstructured.Unstructured) {
	t.Helper()
	obj := &unstructured.Unstructured{Object: cm(name, map[string]any{"app": app}, map[string]any{"v": v})}
	obj.SetNamespace(ns)
	if owner != nil {
		yes := true
		obj.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: owner.GetAPIVersion(), Kind: owner.GetKind(), Name: owner.GetName(),
			UID: owner.GetUID(), Controller: &yes}})
	}
	if _, err := env.dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace(ns).
		Create(t.Context(), obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestDryRunController: a controller with spec.dryRun over a parent
// without children and one with children to update, delete and adopt:
// its hook is called, its applier publishes a plan per parent — valid
// against plan.json, shown by uc trace — and not one object in the
// namespace is created or changed, not even an Event. The same controller
// without dryRun then does what the plans said.
func TestDryRunController(t *testing.T) {
	ctx := t.Context()
	ns := namespace(t)
	const controller = "dryrun"
	// The parents and their children first, then the controller: from
	// then on, nothing but uc could change the namespace.
	installCRD(t, "test/e2e/testdata/composite-crd.yaml", compositeGVR)
	fresh := createEchoComposite(t, ns, "fresh", controller, "1")
	grown := createComposite(t, ns, "grown", controller, map[string]any{"selector": selectApp("grown"),
		"children": []any{cm("grown-cm", map[string]any{"app": "grown"}, map[string]any{"v": "new"}),
			cm("grown-orphan", map[string]any{"app": "grown"}, map[string]any{"v": "orphan"})}})
	childConfigMap(t, ns, "grown-cm", "grown", "old", grown)
	childConfigMap(t, ns, "grown-gone", "grown", "gone", grown)
	childConfigMap(t, ns, "grown-orphan", "grown", "orphan", nil)
	before, err := namespaceState(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	registerComposite(t, controller, func(spec map[string]any) { spec["dryRun"] = true })

	wantSteps := map[string]string{
		"fresh": "create ConfigMap.v1 fresh-cm",
		"grown": "update ConfigMap.v1 grown-cm, adopt ConfigMap.v1 grown-orphan, delete ConfigMap.v1 grown-gone",
	}
	schema := planSchema(t)
	plans := map[string]*bus.Plan{}
	for name, parent := range map[string]*unstructured.Unstructured{"fresh": fresh, "grown": grown} {
		eventually(t, time.Minute, func() error {
			p, data, err := lastPlan(ctx, controller, parent.GetUID())
			if err != nil {
				return err
			}
			if got := steps(p); got != wantSteps[name] {
				return fmt.Errorf("%s's plan: %s, want %s", name, got, wantSteps[name])
			}
			v, err := sjs.UnmarshalJSON(strings.NewReader(string(data)))
			if err == nil {
				err = schema.Validate(v)
			}
			if err != nil {
				t.Errorf("%s's plan is not valid against plan.json: %v\n%s", name, err, data)
			}
			plans[name] = p
			return nil
		})
	}
	if d := plans["grown"].Children[0].Diff; !strings.Contains(d, "-  v: old") || !strings.Contains(d, "+  v: new") {
		t.Errorf("the update's diff:\n%s", d)
	}
	if s := plans["fresh"].Status; s == nil || s["echo"] != true || plans["fresh"].Events[0].Reason != "Created" {
		t.Errorf("fresh's plan: status %v, events %v", s, plans["fresh"].Events)
	}
	after, err := namespaceState(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(before, after) {
		for k, v := range after {
			if before[k] != v {
				t.Errorf("%s: resourceVersion %q → %q", k, before[k], v)
			}
		}
		for k := range before {
			if _, ok := after[k]; !ok {
				t.Errorf("%s is gone", k)
			}
		}
	}

	// uc trace shows the last plan.
	traces, err := ucJSON[[]inspect.Trace](ctx, "trace", "composite/grown", "-n", ns)
	if err != nil {
		t.Fatal(err)
	}
	if len(traces) != 1 || !traces[0].DryRun || traces[0].Verdict.State != inspect.Planned || len(traces[0].Plans) != 1 ||
		steps(traces[0].Plans[0].Plan) != wantSteps["grown"] {
		t.Errorf("uc trace: %+v", traces)
	}
	if out, err := ucCLI(ctx, "trace", "composite/grown", "-n", ns); err != nil || !strings.Contains(out, "adopt     ConfigMap.v1 "+ns+"/grown-orphan") {
		t.Errorf("uc trace's text: %v\n%s", err, out)
	}

	// Without dryRun, the controller does what the plans said.
	patch := []byte(`{"spec":{"dryRun":false}}`)
	if _, err := env.dyn.Resource(v1alpha1.Resource).Patch(ctx, controller, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, func() error {
		return errors.Join(compositeSynced(ctx, ns, "fresh"), compositeSynced(ctx, ns, "grown"))
	})
	for name, parent := range map[string]*unstructured.Unstructured{"fresh": fresh, "grown": grown} {
		for _, s := range plans[name].Children {
			live, err := getConfigMap(ctx, ns, s.Name)
			switch {
			case s.Action == "delete":
				if err := gone(err, s.Name); err != nil {
					t.Error(err)
				}
			case err != nil:
				t.Errorf("%s %s: %v", s.Action, s.Name, err)
			default:
				if err := controlledBy(live, parent.GetUID()); err != nil {
					t.Errorf("%s %s: %v", s.Action, s.Name, err)
				}
			}
		}
	}
	if cm, err := getConfigMap(ctx, ns, "grown-cm"); err != nil || cm.Data["v"] != "new" {
		t.Errorf("the update the plan said: %v, %v", cm, err)
	}
}

// steps formats a plan's steps: "action kind name, …".
func steps(p *bus.Plan) string {
	var out []string
	for _, s := range p.Children {
		out = append(out, s.Action+" "+s.Kind+" "+s.Name)
	}
	return strings.Join(out, ", ")
}
