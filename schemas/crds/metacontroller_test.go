package crds

import (
	"os"
	"reflect"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// TestMetacontrollerFieldsKept: a UniversalController setting every field
// of Metacontroller's CompositeController spec loses none when the
// apiserver prunes it with the CRD's schema, nor when uc decodes it into
// its Go types.
func TestMetacontrollerFieldsKept(t *testing.T) {
	data, err := os.ReadFile("testdata/compositecontroller-every-field.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	if err := yaml.Unmarshal(data, &obj); err != nil {
		t.Fatal(err)
	}
	pruned := runtime.DeepCopyJSON(obj)
	if dropped := pruning.PruneWithOptions(pruned, structural(t, "universalcontrollers.universalcontroller.dev"), true,
		structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true}); len(dropped) > 0 {
		t.Errorf("the schema prunes %v", dropped)
	}
	if !reflect.DeepEqual(pruned, obj) {
		t.Error("the pruned object differs from the one written")
	}
	if err := yaml.UnmarshalStrict(data, &v1alpha1.UniversalController{}); err != nil {
		t.Errorf("the Go types lack a field: %v", err)
	}
}

// structural is the structural schema of the named CRD's only version.
func structural(t *testing.T, name string) *structuralschema.Structural {
	t.Helper()
	crds, err := All()
	if err != nil {
		t.Fatal(err)
	}
	for _, crd := range crds {
		if crd.Name != name {
			continue
		}
		var internal apiextensions.JSONSchemaProps
		if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(crd.Spec.Versions[0].Schema.OpenAPIV3Schema, &internal, nil); err != nil {
			t.Fatal(err)
		}
		s, err := structuralschema.NewStructural(&internal)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	t.Fatalf("no CRD %s", name)
	return nil
}
