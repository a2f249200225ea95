package core

import (
	"encoding/json"
	"fmt"
	"sync/atomic"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// StatusSchema is what the apiserver admits in the status of a parent kind:
// the status of its CustomResourceDefinition's schema, made structural as
// the apiserver makes it. The status of a kind without a CRD (a built-in
// kind, an aggregated API), or whose CRD uc cannot read, is unknown: Prune
// keeps everything, and only the apiserver's answer tells what it refuses.
type StatusSchema struct {
	// Source names where the schema comes from, for messages.
	Source string
	root   *structuralschema.Structural // {status: ...} at the object's root; nil: unknown
	// refused is set once the apiserver refused uc's additions to a status
	// this schema admits (a validation the pruning does not know of).
	refused atomic.Bool
}

// Known tells whether the schema comes from the kind's CRD.
func (s *StatusSchema) Known() bool { return s.root != nil }

// Prune removes from status, in place, the fields the schema does not
// declare, exactly as the apiserver prunes an object it stores, and returns
// their paths ("status.conditions[0].reason"), sorted.
func (s *StatusSchema) Prune(status map[string]any) []string {
	if s.root == nil {
		return nil
	}
	obj := map[string]any{"status": status}
	dropped := pruning.PruneWithOptions(obj, s.root, false, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})
	if _, kept := obj["status"]; !kept {
		clear(status) // the schema declares no status at all
	}
	return dropped
}

// AdditionsRefused tells whether the apiserver refused uc's additions to a
// status of this schema: then uc writes the hook's status alone.
func (s *StatusSchema) AdditionsRefused() bool { return s.refused.Load() }

// RefuseAdditions records that the apiserver refused uc's additions. A new
// version of the CRD makes a new StatusSchema, which tries them again.
func (s *StatusSchema) RefuseAdditions() { s.refused.Store(true) }

// StatusSchemaOf makes the status schema of one version of a CRD, as the
// apiserver makes it.
func StatusSchemaOf(crd *unstructured.Unstructured, version string) (*StatusSchema, error) {
	root, err := structuralOf(crd, version)
	if err != nil {
		return nil, err
	}
	return &StatusSchema{Source: "CustomResourceDefinition " + crd.GetName(), root: root}, nil
}

// structuralOf makes the structural schema of one version of a CRD.
func structuralOf(crd *unstructured.Unstructured, version string) (*structuralschema.Structural, error) {
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	for _, v := range versions {
		m, _ := v.(map[string]any)
		if m["name"] != version {
			continue
		}
		raw, _, _ := unstructured.NestedFieldNoCopy(m, "schema", "openAPIV3Schema")
		b, err := json.Marshal(raw)
		if err != nil {
			return nil, err
		}
		var props apiextensionsv1.JSONSchemaProps
		if err := json.Unmarshal(b, &props); err != nil {
			return nil, err
		}
		return Structural(&props)
	}
	return nil, fmt.Errorf("no version %s", version)
}

// Structural makes a CRD's schema structural, as the apiserver does.
func Structural(props *apiextensionsv1.JSONSchemaProps) (*structuralschema.Structural, error) {
	var internal apiextensions.JSONSchemaProps
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(props, &internal, nil); err != nil {
		return nil, err
	}
	return structuralschema.NewStructural(&internal)
}
