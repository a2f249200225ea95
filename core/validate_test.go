package core

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// TestValidate: a field uc does not know and a value of the wrong type are
// named with their paths, in a controller and a decorator, and a valid
// object has no error.
func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		obj  map[string]any
		want []string
	}{
		{"a typo", map[string]any{"kind": "UniversalController", "spec": map[string]any{"hooks": map[string]any{"sync": map[string]any{"delivery": map[string]any{"timeot": "5s"}}}}},
			[]string{`unknown field "spec.hooks.sync.delivery.timeot"`}},
		{"a decorator's", map[string]any{"kind": "DecoratorController", "spec": map[string]any{"resources": []any{map[string]any{"apiVersion": "v1", "resource": "pods", "labelSelectr": map[string]any{}}}}},
			[]string{`unknown field "spec.resources[0].labelSelectr"`}},
		{"a wrong type", map[string]any{"kind": "UniversalController", "spec": map[string]any{"resyncPeriodSeconds": "often"}},
			[]string{`spec.resyncPeriodSeconds: Invalid value: "string": must be of type integer`}},
		{"a value out of the enum", map[string]any{"kind": "CompositeController", "spec": map[string]any{"childResources": []any{map[string]any{"apiVersion": "v1", "resource": "pods", "updateStrategy": map[string]any{"method": "Rolling"}}}}},
			[]string{`spec.childResources[0].updateStrategy.method: Unsupported value: Rolling`}},
		{"none", map[string]any{"kind": "UniversalController", "spec": map[string]any{"resyncPeriodSeconds": int64(30), "hooks": map[string]any{"sync": map[string]any{"delivery": map[string]any{"timeout": "5s"}}}}}, nil},
		{"not a controller", map[string]any{"kind": "ConfigMap", "data": map[string]any{"x": "y"}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Validate(&unstructured.Unstructured{Object: tc.obj})
			if err != nil || strings.Join(got, "; ") != strings.Join(tc.want, "; ") {
				t.Errorf("Validate = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// TestShippedControllersAreValid: every controller object the repository
// ships — examples, the install, the docs' files — is valid against uc's
// CRDs, so none of them teaches a typo.
func TestShippedControllersAreValid(t *testing.T) {
	var checked int
	for _, root := range []string{"../examples", "../deploy", "../docs"} {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") {
				return err
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, doc := range bytes.Split(data, []byte("\n---")) {
				var obj map[string]any
				if err := yaml.Unmarshal(doc, &obj); err != nil || obj == nil {
					continue // a template or not an object: not a controller
				}
				u := &unstructured.Unstructured{Object: obj}
				switch u.GetKind() {
				case "UniversalController", "UniversalDecorator", "CompositeController", "DecoratorController":
					checked++
					problems, err := Validate(u)
					if err != nil {
						t.Fatal(err)
					}
					for _, p := range problems {
						t.Errorf("%s: %s %s: %s", path, u.GetKind(), u.GetName(), p)
					}
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if checked < 10 {
		t.Fatalf("checked %d controller objects; the walk found too few", checked)
	}
	t.Logf("checked %d controller objects", checked)
}
