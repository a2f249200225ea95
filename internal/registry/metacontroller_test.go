package registry

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"universalcontroller.dev/uc/core"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// Metacontroller's objects are decoded as uc's, under names of their own,
// and keep Metacontroller's finalizers and attachment annotation.
func TestMetacontrollerSources(t *testing.T) {
	r := testRegistry(WithMetacontrollerAPI())
	sts := map[string]any{"apiVersion": "apps/v1", "resource": "statefulsets"}
	hooks := map[string]any{"sync": map[string]any{}, "finalize": map[string]any{}}
	for _, tc := range []struct {
		controller, kind string
		spec             map[string]any
		finalizer        string
		decorator        bool
	}{
		{"web", "UniversalController", map[string]any{"parentResource": sts, "hooks": hooks}, "universalcontroller.dev/web", false},
		{"cc=web", "CompositeController", map[string]any{"parentResource": sts, "hooks": hooks}, "metacontroller.io/compositecontroller-web", false},
		{"ucd=web", "UniversalDecorator", map[string]any{"resources": []any{sts}, "hooks": hooks}, "decorator.universalcontroller.dev/web", true},
		{"dc=web", "DecoratorController", map[string]any{"resources": []any{sts}, "hooks": hooks}, "metacontroller.io/decoratorcontroller-web", true},
	} {
		src, name := r.objects(tc.controller)
		if name != "web" {
			t.Errorf("%s: object name %q", tc.controller, name)
		}
		u := &unstructured.Unstructured{Object: map[string]any{
			"kind": tc.kind, "metadata": map[string]any{"name": name}, "spec": tc.spec,
		}}
		c, err := src.resolve(u, tc.controller)
		if err != nil {
			t.Fatalf("%s: %v", tc.controller, err)
		}
		if c.Name != tc.controller || c.Finalizer() != tc.finalizer || (c.Decorator != nil) != tc.decorator {
			t.Errorf("%s: registered as %s, finalizer %s, decorator %v", tc.controller, c.Name, c.Finalizer(), c.Decorator)
		}
		if src.gvr.Resource != map[string]string{"UniversalController": "universalcontrollers", "CompositeController": "compositecontrollers",
			"UniversalDecorator": "universaldecorators", "DecoratorController": "decoratorcontrollers"}[tc.kind] {
			t.Errorf("%s: served from %s", tc.controller, src.gvr)
		}
	}
	dc, _ := r.sources[3].resolve(&unstructured.Unstructured{Object: map[string]any{
		"kind": "DecoratorController", "metadata": map[string]any{"name": "web"},
		"spec": map[string]any{"resources": []any{sts}, "hooks": hooks},
	}}, "dc=web")
	attachment := &unstructured.Unstructured{}
	attachment.SetAnnotations(map[string]string{"metacontroller.k8s.io/decorator-controller": "web"})
	if !dc.IsAttachment(attachment) {
		t.Error("an attachment Metacontroller made is not the DecoratorController's")
	}
}

// A controller object from a file is registered as the registry would:
// Metacontroller's and decorators under their bus names, keeping their
// finalizers; anything else is refused.
func TestControllerOf(t *testing.T) {
	resolve := func(rule v1alpha1.ResourceRule) (core.Resource, error) {
		gv, _ := schema.ParseGroupVersion(rule.APIVersion)
		return core.Resource{GVR: gv.WithResource(rule.Resource), GVK: gv.WithKind("Thing"), Namespaced: true}, nil
	}
	sts := map[string]any{"apiVersion": "apps/v1", "resource": "statefulsets"}
	spec := map[string]any{"parentResource": sts, "resources": []any{sts}}
	noStatus := func(core.Resource) (bool, error) { return false, nil }
	for _, tc := range []struct {
		apiVersion, kind string
		name, finalizer  string
		wantErr          string
	}{
		{"universalcontroller.dev/v1alpha1", "UniversalController", "web", "universalcontroller.dev/web", ""},
		{"universalcontroller.dev/v1alpha1", "UniversalDecorator", "ucd=web", "decorator.universalcontroller.dev/web", ""},
		{"metacontroller.k8s.io/v1alpha1", "CompositeController", "cc=web", "metacontroller.io/compositecontroller-web", ""},
		{"metacontroller.k8s.io/v1alpha1", "DecoratorController", "dc=web", "metacontroller.io/decoratorcontroller-web", ""},
		{"v1", "ConfigMap", "", "", "is not a controller object"},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			u := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": tc.apiVersion, "kind": tc.kind, "metadata": map[string]any{"name": "web"}, "spec": spec,
			}}
			c, err := core.ControllerOf(u, resolve, noStatus)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want one saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			parent := c.Parent.GVR
			if c.Decorator != nil {
				parent = c.Decorator.Resources[0].GVR
			}
			if c.Name != tc.name || c.Finalizer() != tc.finalizer || parent.Resource != "statefulsets" {
				t.Errorf("registered as %s, finalizer %s, parent %s", c.Name, c.Finalizer(), parent)
			}
		})
	}
}
