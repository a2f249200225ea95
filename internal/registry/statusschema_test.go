package registry

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"sigs.k8s.io/yaml"

	"universalcontroller.dev/uc/core"
)

// statusCRD is a CRD of kind Widget whose version v1 has the given status
// schema (YAML; "" declares no status), with a spec as authors write one.
func statusCRD(t *testing.T, status string) *unstructured.Unstructured {
	t.Helper()
	doc := `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com, resourceVersion: "1"}
spec:
  group: example.com
  names: {kind: Widget, plural: widgets}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              copies: {type: integer}
`
	if status != "" {
		doc += "          status:\n"
		for _, line := range strings.Split(strings.TrimSpace(status), "\n") {
			doc += "            " + line + "\n"
		}
	}
	var obj map[string]any
	if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: obj}
}

// The status shapes CRD authors write.
const (
	closedStatus = `
type: object
properties:
  working: {type: boolean}
  actual_copies: {type: integer}
`
	narrowConditions = `
type: object
properties:
  conditions:
    type: array
    items:
      type: object
      properties:
        type: {type: string}
        status: {type: string}
`
	// kubebuilder's metav1.Condition, and no observedGeneration.
	conditionsNoGeneration = `
type: object
properties:
  phase: {type: string}
  conditions:
    type: array
    x-kubernetes-list-type: map
    x-kubernetes-list-map-keys: [type]
    items:
      type: object
      required: [lastTransitionTime, message, reason, status, type]
      properties:
        lastTransitionTime: {type: string, format: date-time}
        message: {type: string, maxLength: 32768}
        observedGeneration: {type: integer, format: int64, minimum: 0}
        reason: {type: string, maxLength: 1024, minLength: 1, pattern: '^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$'}
        status: {type: string, enum: ["True", "False", Unknown]}
        type: {type: string, maxLength: 316}
`
	preserveStatus = `
type: object
x-kubernetes-preserve-unknown-fields: true
`
)

// statusWithAdditions is a hook's status with uc's additions.
func statusWithAdditions() map[string]any {
	return map[string]any{
		"working":            true,
		"actual_copies":      int64(3),
		"phase":              "Running",
		"observedGeneration": int64(2),
		"conditions": []any{map[string]any{
			"type": "Synced", "status": "True", "reason": "Applied", "message": "the latest hook reply was applied",
			"observedGeneration": int64(2), "lastTransitionTime": "2025-01-01T00:00:00Z",
		}},
	}
}

// TestStatusSchemaPrune: a status is pruned against its CRD's schema as the
// apiserver prunes it — closed status, narrower condition items, no
// observedGeneration, preserved unknown fields, no status declared — and
// kept whole when the kind has no CRD.
func TestStatusSchemaPrune(t *testing.T) {
	synced := map[string]any{"type": "Synced", "status": "True"}
	for _, tc := range []struct {
		name       string
		status     string // "": the CRD declares no status
		noCRD      bool
		want       map[string]any
		wantPruned []string
	}{
		{"closed status", closedStatus, false,
			map[string]any{"working": true, "actual_copies": int64(3)},
			[]string{"status.conditions", "status.observedGeneration", "status.phase"}},
		{"conditions of type and status", narrowConditions, false,
			map[string]any{"conditions": []any{synced}},
			[]string{"status.actual_copies", "status.conditions[0].lastTransitionTime", "status.conditions[0].message",
				"status.conditions[0].observedGeneration", "status.conditions[0].reason", "status.observedGeneration", "status.phase", "status.working"}},
		{"metav1.Condition, no observedGeneration", conditionsNoGeneration, false,
			map[string]any{"phase": "Running", "conditions": statusWithAdditions()["conditions"]},
			[]string{"status.actual_copies", "status.observedGeneration", "status.working"}},
		{"preserve unknown fields", preserveStatus, false, statusWithAdditions(), nil},
		{"no status declared", "", false, map[string]any{}, []string{"status"}},
		{"no CRD", "", true, statusWithAdditions(), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &core.StatusSchema{Source: "no CustomResourceDefinition"}
			if !tc.noCRD {
				var err error
				if s, err = core.StatusSchemaOf(statusCRD(t, tc.status), "v1"); err != nil {
					t.Fatal(err)
				}
			}
			status := statusWithAdditions()
			pruned := s.Prune(status)
			if !equality.Semantic.DeepEqual(status, tc.want) {
				t.Errorf("pruned status %v, want %v", status, tc.want)
			}
			if !slices.Equal(pruned, tc.wantPruned) {
				t.Errorf("pruned fields %q, want %q", pruned, tc.wantPruned)
			}
			if s.Known() == tc.noCRD {
				t.Errorf("Known() = %v", s.Known())
			}
		})
	}
}

// TestStatusSchemasOnly: the CRD informer keeps of a CRD only its status
// schemas, which prune as the whole CRD's do.
func TestStatusSchemasOnly(t *testing.T) {
	crd := statusCRD(t, closedStatus)
	slim, err := statusSchemasOnly(crd)
	if err != nil {
		t.Fatal(err)
	}
	u := slim.(*unstructured.Unstructured)
	if _, found, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "versions"); !found {
		t.Fatal("versions dropped")
	}
	v := u.Object["spec"].(map[string]any)["versions"].([]any)[0].(map[string]any)
	if _, found, _ := unstructured.NestedFieldNoCopy(v, "schema", "openAPIV3Schema", "properties", "spec"); found {
		t.Error("the spec's schema is kept")
	}
	if u.GetName() != crd.GetName() || u.GetResourceVersion() != crd.GetResourceVersion() {
		t.Errorf("identity %s@%s, want %s@%s", u.GetName(), u.GetResourceVersion(), crd.GetName(), crd.GetResourceVersion())
	}
	full, err := core.StatusSchemaOf(crd, "v1")
	if err != nil {
		t.Fatal(err)
	}
	kept, err := core.StatusSchemaOf(u, "v1")
	if err != nil {
		t.Fatal(err)
	}
	a, b := statusWithAdditions(), statusWithAdditions()
	if pa, pb := full.Prune(a), kept.Prune(b); !slices.Equal(pa, pb) || !equality.Semantic.DeepEqual(a, b) {
		t.Errorf("the slim CRD prunes %q to %v, the whole one %q to %v", pb, b, pa, a)
	}
}

// TestStatusSchemaFollowsCRD: a parent kind's schema comes from its CRD
// once listed, is the same object while the CRD does not change (so what
// uc learned of it stays), and a new one when it does; a kind without a CRD
// has an unknown schema.
func TestStatusSchemaFollowsCRD(t *testing.T) {
	crd := statusCRD(t, narrowConditions)
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{crdResource: "CustomResourceDefinitionList"}, crd)
	s := newStatusSchemas(slog.New(slog.DiscardHandler))
	widgets := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	if got := s.get(widgets); got.Known() {
		t.Fatalf("schema known without watching CRDs: %s", got.Source)
	}
	s.watch(dyn)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	s.run(ctx, 10*time.Second)

	first := s.get(widgets)
	if !first.Known() {
		t.Fatalf("schema unknown: %s", first.Source)
	}
	first.RefuseAdditions()
	if again := s.get(widgets); again != first || !again.AdditionsRefused() {
		t.Error("the same CRD gave another schema")
	}
	if deployments := s.get(schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}); deployments.Known() {
		t.Errorf("a kind without a CRD has a known schema: %s", deployments.Source)
	}

	changed := statusCRD(t, preserveStatus)
	changed.SetResourceVersion("2")
	if _, err := dyn.Resource(crdResource).Update(ctx, changed, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	var next *core.StatusSchema
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		next = s.get(widgets)
		return next != first, nil
	}); err != nil {
		t.Fatal("the schema did not follow the CRD's change")
	}
	if next.AdditionsRefused() {
		t.Error("what uc learned of the old CRD stays")
	}
	status := statusWithAdditions()
	if pruned := next.Prune(status); len(pruned) > 0 {
		t.Errorf("the new schema prunes %q", pruned)
	}
}
