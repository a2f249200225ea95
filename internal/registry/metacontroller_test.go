package registry

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
