package registry

import (
	"log/slog"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"

	"universalcontroller.dev/uc/core"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// testRegistry is a registry whose discovery serves StatefulSets (with a
// status subresource), Namespaces (cluster-scoped) and Services.
func testRegistry(opts ...Option) *Registry {
	disco := &fakediscovery.FakeDiscovery{Fake: &k8stesting.Fake{Resources: []*metav1.APIResourceList{
		{GroupVersion: "apps/v1", APIResources: []metav1.APIResource{
			{Name: "statefulsets", Kind: "StatefulSet", Namespaced: true},
			{Name: "statefulsets/status", Kind: "StatefulSet", Namespaced: true},
		}},
		{GroupVersion: "v1", APIResources: []metav1.APIResource{
			{Name: "namespaces", Kind: "Namespace"},
			{Name: "services", Kind: "Service", Namespaced: true},
		}},
	}}}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		{Group: "apps", Version: "v1", Resource: "statefulsets"}: "StatefulSetList",
		{Version: "v1", Resource: "namespaces"}:                  "NamespaceList",
		{Version: "v1", Resource: "services"}:                    "ServiceList",
	})
	return New(dyn, disco, slog.New(slog.DiscardHandler), opts...)
}

func decoratorObject(t *testing.T, spec map[string]any) *unstructured.Unstructured {
	t.Helper()
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "universalcontroller.dev/v1alpha1", "kind": "UniversalDecorator",
		"metadata": map[string]any{"name": "deco", "generation": int64(3)},
		"spec":     spec,
	}}
}

func TestResolveDecorator(t *testing.T) {
	r := testRegistry()
	c, err := r.resolveDecorator(decoratorObject(t, map[string]any{
		"resources": []any{
			map[string]any{"apiVersion": "apps/v1", "resource": "statefulsets", "ignoreStatusChanges": true,
				"annotationSelector": map[string]any{"matchExpressions": []any{map[string]any{"key": "opt-in", "operator": "Exists"}}}},
			map[string]any{"apiVersion": "v1", "resource": "namespaces",
				"labelSelector": map[string]any{"matchLabels": map[string]any{"team": "a"}}},
		},
		"attachments": []any{map[string]any{"apiVersion": "v1", "resource": "services", "updateStrategy": map[string]any{"method": "RollingInPlace"}}},
		"hooks":       map[string]any{"sync": map[string]any{}, "finalize": map[string]any{}},
	}), "ucd=deco")
	if err != nil {
		t.Fatal(err)
	}
	if c.Name != "ucd=deco" || c.Generation != 3 || c.Decorator.Name != "deco" || c.Finalizer() != "decorator.universalcontroller.dev/deco" {
		t.Errorf("registered as %s (generation %d, decorator %s, finalizer %s)", c.Name, c.Generation, c.Decorator.Name, c.Finalizer())
	}
	if len(c.Children) != 1 || c.Children[0].Method != v1alpha1.ChildUpdateInPlace || c.Rolling() {
		t.Errorf("attachments %+v: want Services updated in place, not rolled out", c.Children)
	}
	sts, ok := c.Decorator.Decorated("apps/v1/statefulsets")
	if !ok || !sts.StatusSubresource || !sts.IgnoreStatusChanges || !sts.Namespaced {
		t.Fatalf("statefulsets resolved as %+v", sts)
	}
	ns, ok := c.Decorator.Decorated("v1/namespaces")
	if !ok || ns.StatusSubresource || ns.Namespaced {
		t.Fatalf("namespaces resolved as %+v", ns)
	}
	if view := c.Decorating(ns); view.Parent.GVK.Kind != "Namespace" || view.Name != c.Name {
		t.Errorf("the view for namespaces has parent %s", view.Parent.GVK)
	}

	obj := func(labels, annotations map[string]string, finalizers ...string) metav1.Object {
		return &metav1.ObjectMeta{Labels: labels, Annotations: annotations, Finalizers: finalizers}
	}
	for _, tc := range []struct {
		name      string
		d         *core.Decorated
		obj       metav1.Object
		decorates bool
	}{
		{"annotated", sts, obj(nil, map[string]string{"opt-in": ""}), true},
		{"not annotated", sts, obj(map[string]string{"opt-in": ""}, nil), false},
		{"not annotated, with the finalizer", sts, obj(nil, nil, c.Finalizer()), true},
		{"labelled", ns, obj(map[string]string{"team": "a"}, nil), true},
		{"labelled otherwise", ns, obj(map[string]string{"team": "b"}, nil), false},
	} {
		if got := c.Decorates(tc.d, tc.obj); got != tc.decorates {
			t.Errorf("%s: decorates = %t, want %t", tc.name, got, tc.decorates)
		}
	}
	mine := obj(nil, map[string]string{core.AnnotationDecorator: "deco"})
	theirs := obj(nil, map[string]string{core.AnnotationDecorator: "other"})
	if !c.IsAttachment(mine) || c.IsAttachment(theirs) || c.IsAttachment(obj(nil, nil)) {
		t.Error("attachments are told by the decorator's annotation")
	}
}

func TestResolveDecoratorRejects(t *testing.T) {
	r := testRegistry()
	sts := map[string]any{"apiVersion": "apps/v1", "resource": "statefulsets"}
	hooks := map[string]any{"sync": map[string]any{}}
	for _, tc := range []struct {
		name string
		spec map[string]any
		err  string
	}{
		{"a resource that does not resolve", map[string]any{"hooks": hooks,
			"resources": []any{map[string]any{"apiVersion": "nowhere.example.com/v1", "resource": "widgets"}}}, "resources[0]: resolve"},
		{"a resource named twice", map[string]any{"hooks": hooks, "resources": []any{sts, sts}}, "resources[1]: apps/v1/statefulsets is named twice"},
		{"an invalid annotation selector", map[string]any{"hooks": hooks, "resources": []any{map[string]any{"apiVersion": "apps/v1", "resource": "statefulsets",
			"annotationSelector": map[string]any{"matchExpressions": []any{map[string]any{"key": "k", "operator": "Bogus"}}}}}}, "resources[0]: annotationSelector"},
		{"an attachment that does not resolve", map[string]any{"hooks": hooks, "resources": []any{sts},
			"attachments": []any{map[string]any{"apiVersion": "v1", "resource": "gadgets"}}}, "attachments[0]: resolve"},
		{"a shadow of its sync hook", map[string]any{"hooks": map[string]any{"sync": map[string]any{"shadow": map[string]any{}}}, "resources": []any{sts}},
			"hooks.sync.shadow: a UniversalDecorator's sync hook has no shadow"},
	} {
		_, err := r.resolveDecorator(decoratorObject(t, tc.spec), "ucd=deco")
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: err = %v, want one containing %q", tc.name, err, tc.err)
		}
	}
}
