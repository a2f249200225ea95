package contracttest

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"universalcontroller.dev/uc/internal/golden"
	"universalcontroller.dev/uc/schemas/crds"
)

// TestAPIReference: docs/reference/api.md lists every field of uc's kinds
// with its type and description, as the CustomResourceDefinitions
// generated from the Go types (schemas/v1alpha1) declare them; a change
// to a type without `go test ./internal/contracttest -run TestAPIReference
// -update` (make generate) fails here.
func TestAPIReference(t *testing.T) {
	all, err := crds.All()
	if err != nil {
		t.Fatal(err)
	}
	var page bytes.Buffer
	page.WriteString("# The universalcontroller.dev API: reference\n\n")
	page.WriteString("Generated from the CustomResourceDefinitions in `schemas/crds`, which are\n")
	page.WriteString("generated from the Go types in `schemas/v1alpha1` (`make generate`). Every\n")
	page.WriteString("field, its type and what it does; `kubectl explain` says the same on a cluster.\n")
	for _, crd := range all {
		for _, v := range crd.Spec.Versions {
			fmt.Fprintf(&page, "\n## %s (%s/%s)\n\n", crd.Spec.Names.Kind, crd.Spec.Group, v.Name)
			root := v.Schema.OpenAPIV3Schema
			if d := oneLine(root.Description); d != "" {
				fmt.Fprintf(&page, "%s\n\n", d)
			}
			page.WriteString("| field | type | description |\n|---|---|---|\n")
			for _, name := range sortedKeys(root.Properties) {
				if name == "apiVersion" || name == "kind" || name == "metadata" {
					continue
				}
				prop := root.Properties[name]
				fields(&page, name, &prop)
			}
		}
	}
	golden.CheckFile(t, "../../docs/reference/api.md", page.Bytes())
}

// fields writes the row of the field at path and of every field below it.
func fields(page *bytes.Buffer, path string, s *apiextensionsv1.JSONSchemaProps) {
	typ := s.Type
	switch {
	case s.XIntOrString:
		typ = "int or string"
	case s.XPreserveUnknownFields != nil && *s.XPreserveUnknownFields && len(s.Properties) == 0:
		typ = "any"
	}
	if s.Type == "array" && s.Items != nil && s.Items.Schema != nil {
		typ = "array of " + s.Items.Schema.Type
	}
	if len(s.Enum) > 0 {
		var values []string
		for _, e := range s.Enum {
			values = append(values, strings.Trim(string(e.Raw), `"`))
		}
		typ += ": " + strings.Join(values, ", ")
	}
	fmt.Fprintf(page, "| `%s` | %s | %s |\n", path, typ, strings.ReplaceAll(oneLine(s.Description), "|", "\\|"))
	for _, name := range sortedKeys(s.Properties) {
		prop := s.Properties[name]
		fields(page, path+"."+name, &prop)
	}
	if s.Items != nil && s.Items.Schema != nil {
		for _, name := range sortedKeys(s.Items.Schema.Properties) {
			prop := s.Items.Schema.Properties[name]
			fields(page, path+"[]."+name, &prop)
		}
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil && len(s.AdditionalProperties.Schema.Properties) > 0 {
		for _, name := range sortedKeys(s.AdditionalProperties.Schema.Properties) {
			prop := s.AdditionalProperties.Schema.Properties[name]
			fields(page, path+".*."+name, &prop)
		}
	}
}

func sortedKeys(m map[string]apiextensionsv1.JSONSchemaProps) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// oneLine is a description as one table cell.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
