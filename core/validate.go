package core

import (
	"fmt"
	"sort"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"universalcontroller.dev/uc/schemas/crds"
)

// Validate checks a controller object — a UniversalController or
// UniversalDecorator, or one of Metacontroller's, whose spec is theirs field
// for field — against uc's CustomResourceDefinition of its kind, as
// `kubectl --validate=strict` would: a field the schema does not declare
// (a typo) and a value of the wrong type or out of its enum are errors,
// each with the field's path. An object of another kind has none.
func Validate(u *unstructured.Unstructured) ([]string, error) {
	kind := schemaKinds[u.GetKind()]
	if kind == "" {
		return nil, nil
	}
	props, err := schemaOf(kind)
	if err != nil {
		return nil, err
	}
	var internal apiextensions.JSONSchemaProps
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(props, &internal, nil); err != nil {
		return nil, err
	}
	structural, err := structuralschema.NewStructural(&internal)
	if err != nil {
		return nil, err
	}
	obj := runtime.DeepCopyJSON(u.Object)
	delete(obj, "metadata") // the apiserver's, not the CRD's, to judge
	var problems []string
	for _, path := range pruning.PruneWithOptions(obj, structural, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true}) {
		problems = append(problems, fmt.Sprintf("unknown field %q", path))
	}
	problems = append(problems, typeErrors("", obj, structural)...)
	sort.Strings(problems)
	return problems, nil
}

// typeErrors are the values below path that are not of their schema's
// type or not among its enum values, as the apiserver's validation words
// them.
func typeErrors(path string, v any, s *structuralschema.Structural) []string {
	if s == nil || v == nil {
		return nil
	}
	at := func(name string) string {
		if path == "" {
			return name
		}
		return path + "." + name
	}
	var out []string
	switch v := v.(type) {
	case map[string]any:
		if s.Type != "" && s.Type != "object" {
			return []string{fmt.Sprintf("%s: Invalid value: \"object\": must be of type %s", path, s.Type)}
		}
		for k, x := range v {
			if p, ok := s.Properties[k]; ok {
				out = append(out, typeErrors(at(k), x, &p)...)
			} else if s.AdditionalProperties != nil {
				out = append(out, typeErrors(at(k), x, s.AdditionalProperties.Structural)...)
			}
		}
	case []any:
		if s.Type != "" && s.Type != "array" {
			return []string{fmt.Sprintf("%s: Invalid value: \"array\": must be of type %s", path, s.Type)}
		}
		for i, x := range v {
			out = append(out, typeErrors(fmt.Sprintf("%s[%d]", path, i), x, s.Items)...)
		}
	default:
		got := jsonType(v)
		ok := s.Type == "" || s.Type == got || s.Type == "number" && got == "integer" || s.XIntOrString && (got == "integer" || got == "string")
		if !ok {
			return []string{fmt.Sprintf("%s: Invalid value: %q: must be of type %s", path, got, s.Type)}
		}
		if s.ValueValidation != nil && len(s.ValueValidation.Enum) > 0 && !inEnum(v, s.ValueValidation.Enum) {
			return []string{fmt.Sprintf("%s: Unsupported value: %v", path, v)}
		}
	}
	return out
}

// jsonType is the JSON Schema type of a decoded JSON value.
func jsonType(v any) string {
	switch v := v.(type) {
	case string:
		return "string"
	case bool:
		return "boolean"
	case int, int32, int64:
		return "integer"
	case float64:
		if v == float64(int64(v)) {
			return "integer" // JSON does not tell 1 from 1.0
		}
		return "number"
	}
	return fmt.Sprintf("%T", v)
}

func inEnum(v any, enum []structuralschema.JSON) bool {
	for _, e := range enum {
		if fmt.Sprint(e.Object) == fmt.Sprint(v) {
			return true
		}
	}
	return false
}

// schemaKinds maps each kind of controller object to the kind of uc's CRD
// its spec follows.
var schemaKinds = map[string]string{"UniversalController": "UniversalController", "CompositeController": "UniversalController",
	"UniversalDecorator": "UniversalDecorator", "DecoratorController": "UniversalDecorator"}

// IsControllerObject tells an object Validate checks: a UniversalController
// or UniversalDecorator, or one of Metacontroller's.
func IsControllerObject(u *unstructured.Unstructured) bool { return schemaKinds[u.GetKind()] != "" }

// schemaOf is the openAPIV3Schema of uc's CRD of kind.
func schemaOf(kind string) (*apiextensionsv1.JSONSchemaProps, error) {
	all, err := crds.All()
	if err != nil {
		return nil, err
	}
	for _, crd := range all {
		if crd.Spec.Names.Kind == kind {
			return crd.Spec.Versions[0].Schema.OpenAPIV3Schema, nil
		}
	}
	return nil, fmt.Errorf("no CustomResourceDefinition of %s", kind)
}
