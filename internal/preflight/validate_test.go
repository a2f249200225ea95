package preflight

import (
	"context"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
	"universalcontroller.dev/uc/core"
)

func obj(t testing.TB, y string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(y), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

var configMaps = core.Resource{
	GVR:        schema.GroupVersionResource{Version: "v1", Resource: "configmaps"},
	GVK:        schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"},
	Namespaced: true,
}

func TestConfigMapValidation(t *testing.T) {
	const good = `{apiVersion: v1, kind: ConfigMap, metadata: {name: a, namespace: ns, labels: {app: x}}, data: {key: v}}`
	for _, tc := range []struct {
		name      string
		obj, live string
		want      string // in the reason; "" for none
	}{
		{name: "valid", obj: good},
		{name: "invalid name", obj: `{apiVersion: v1, kind: ConfigMap, metadata: {name: A_b, namespace: ns}}`, want: "metadata.name"},
		{name: "invalid key", obj: `{apiVersion: v1, kind: ConfigMap, metadata: {name: a, namespace: ns}, data: {"not a key!": v}}`, want: "data[not a key!]"},
		{name: "wrong type", obj: `{apiVersion: v1, kind: ConfigMap, metadata: {name: a, namespace: ns}, data: {key: 5}}`, want: "unrecognized type"},
		{name: "unknown field", obj: `{apiVersion: v1, kind: ConfigMap, metadata: {name: a, namespace: ns}, spec: {}}`, want: "spec"},
		{name: "null", obj: `{apiVersion: v1, kind: ConfigMap, metadata: {name: a, namespace: ns}, data: {key: null}}`, want: "data.key is null"},
		{name: "invalid label", obj: `{apiVersion: v1, kind: ConfigMap, metadata: {name: a, namespace: ns, labels: {"a b": x}}}`, want: "metadata.labels"},
		{name: "unqualified finalizer", obj: `{apiVersion: v1, kind: ConfigMap, metadata: {name: a, namespace: ns, finalizers: [mine]}}`, want: "finalizers"},
		{name: "qualified finalizer", obj: `{apiVersion: v1, kind: ConfigMap, metadata: {name: a, namespace: ns, finalizers: [example.com/mine]}}`},
		{name: "key in data and binaryData", obj: `{apiVersion: v1, kind: ConfigMap, metadata: {name: a, namespace: ns}, data: {k: v}, binaryData: {k: dg==}}`, want: "duplicate"},
		{name: "too large", obj: `{apiVersion: v1, kind: ConfigMap, metadata: {name: a, namespace: ns}, data: {k: "` + strings.Repeat("x", 1<<20+1) + `"}}`, want: "larger"},
		{name: "update", obj: good, live: `{apiVersion: v1, kind: ConfigMap, metadata: {name: a, namespace: ns}, data: {other: v}}`},
		{name: "update of an object the cache does not have", obj: good, live: "none", want: "not in the cache"},
		{name: "update of an immutable one", obj: good, live: `{apiVersion: v1, kind: ConfigMap, metadata: {name: a, namespace: ns}, immutable: true, data: {key: v}}`, want: "immutable"},
		{name: "update of a live one unreadable", obj: good, live: `{apiVersion: v1, kind: ConfigMap, metadata: {name: a, namespace: ns}, binaryData: {key: "not base64!"}}`, want: "the live ConfigMap: binaryData[key]"},
		{name: "update of a live one of a wrong type", obj: good, live: `{apiVersion: v1, kind: ConfigMap, metadata: {name: a, namespace: ns}, immutable: "yes"}`, want: "the live ConfigMap"},
		{name: "update colliding with a live binary key", obj: good, live: `{apiVersion: v1, kind: ConfigMap, metadata: {name: a, namespace: ns}, binaryData: {key: dg==}}`, want: "duplicate"},
		{
			name: "update whose live data makes it too large",
			obj:  good, live: `{apiVersion: v1, kind: ConfigMap, metadata: {name: a, namespace: ns}, data: {other: "` + strings.Repeat("x", 1<<20) + `"}}`,
			want: "Too long",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := Write{Verb: Create, Resource: configMaps, New: obj(t, tc.obj)}
			switch tc.live {
			case "":
			case "none":
				w.Verb = Apply
			default:
				w.Verb, w.Old = Apply, obj(t, tc.live)
			}
			got := newSchemas(nil).couldRefuse(context.Background(), w)
			if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
				t.Fatalf("could refuse: %q, want %q", got, tc.want)
			}
		})
	}
}

// fakeCRDs serves CRDs by resource.
type fakeCRDs map[schema.GroupResource]*apiextensionsv1.CustomResourceDefinition

func (f fakeCRDs) CustomResourceDefinition(_ context.Context, gr schema.GroupResource) (*apiextensionsv1.CustomResourceDefinition, error) {
	return f[gr], nil
}

var widgets = core.Resource{
	GVR:        schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"},
	GVK:        schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"},
	Namespaced: true,
}

// widgetCRD is the CRD of Widgets with the given spec schema, changed by
// edit.
func widgetCRD(t *testing.T, spec string, edit func(*apiextensionsv1.CustomResourceDefinition)) fakeCRDs {
	t.Helper()
	var props apiextensionsv1.JSONSchemaProps
	if err := yaml.Unmarshal([]byte(`{type: object, properties: {spec: `+spec+`}}`), &props); err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com", UID: "u1", ResourceVersion: "1"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.com", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: "Widget", Plural: "widgets"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true, Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &props},
			}},
		},
		Status: apiextensionsv1.CustomResourceDefinitionStatus{Conditions: []apiextensionsv1.CustomResourceDefinitionCondition{
			{Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionTrue},
		}},
	}
	if edit != nil {
		edit(crd)
	}
	return fakeCRDs{widgets.GVR.GroupResource(): crd}
}

func TestCustomResourceValidation(t *testing.T) {
	const spec = `{type: object, required: [size], properties: {
		size: {type: integer, minimum: 1},
		color: {type: string, enum: [red, blue]},
		port: {x-kubernetes-int-or-string: true, anyOf: [{type: integer}, {type: string}]},
		tags: {type: array, x-kubernetes-list-type: set, items: {type: string}},
		free: {type: object, x-kubernetes-preserve-unknown-fields: true}}}`
	widget := func(spec string) string {
		return `{apiVersion: example.com/v1, kind: Widget, metadata: {name: w, namespace: ns}, spec: ` + spec + `}`
	}
	for _, tc := range []struct {
		name string
		crd  func(*apiextensionsv1.CustomResourceDefinition)
		spec string // of the CRD; default spec
		obj  string
		want string // in the reason; "" for none
	}{
		{name: "valid", obj: widget(`{size: 3, color: red, port: http, tags: [a, b], free: {any: thing}}`)},
		{name: "wrong type", obj: widget(`{size: three}`), want: "spec.size"},
		{name: "below minimum", obj: widget(`{size: 0}`), want: "spec.size"},
		{name: "not in enum", obj: widget(`{size: 1, color: green}`), want: "spec.color"},
		{name: "required field missing", obj: widget(`{color: red}`), want: "spec.size"},
		{name: "duplicate in a set", obj: widget(`{size: 1, tags: [a, a]}`), want: "spec.tags"},
		{name: "unknown field", obj: widget(`{size: 1, shape: round}`), want: "spec.shape"},
		{name: "invalid name", obj: `{apiVersion: example.com/v1, kind: Widget, metadata: {name: "W!", namespace: ns}, spec: {size: 1}}`, want: "metadata.name"},
		{name: "other kind", obj: `{apiVersion: example.com/v1, kind: Gadget, metadata: {name: w, namespace: ns}, spec: {size: 1}}`, want: "Gadget"},
		{name: "CEL rules", spec: `{type: object, x-kubernetes-validations: [{rule: "self.size > 0"}], properties: {size: {type: integer}}}`,
			obj: widget(`{size: 1}`), want: "CEL rules"},
		{name: "constraint across fields", spec: `{type: object, properties: {tags: {type: array, maxItems: 2, items: {type: string}}}}`,
			obj: widget(`{tags: [a]}`), want: "spec.tags"},
		{name: "scale subresource", obj: widget(`{size: 1}`), want: "scale", crd: func(c *apiextensionsv1.CustomResourceDefinition) {
			c.Spec.Versions[0].Subresources = &apiextensionsv1.CustomResourceSubresources{Scale: &apiextensionsv1.CustomResourceSubresourceScale{SpecReplicasPath: ".spec.size", StatusReplicasPath: ".status.size"}}
		}},
		{name: "conversion webhook", obj: widget(`{size: 1}`), want: "webhook", crd: func(c *apiextensionsv1.CustomResourceDefinition) {
			c.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter}
		}},
		{name: "not established", obj: widget(`{size: 1}`), want: "established", crd: func(c *apiextensionsv1.CustomResourceDefinition) {
			c.Status.Conditions = nil
		}},
		{name: "being deleted", obj: widget(`{size: 1}`), want: "deleted", crd: func(c *apiextensionsv1.CustomResourceDefinition) {
			c.DeletionTimestamp = &metav1.Time{}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := spec
			if tc.spec != "" {
				s = tc.spec
			}
			got := newSchemas(widgetCRD(t, s, tc.crd)).couldRefuse(context.Background(), Write{Verb: Create, Resource: widgets, New: obj(t, tc.obj)})
			if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
				t.Fatalf("could refuse: %q, want %q", got, tc.want)
			}
		})
	}
}

// A kind uc knows no validation of (a built-in kind besides ConfigMaps) is
// always refusable; nothing written is never.
func TestUnknownKindsAreRefusable(t *testing.T) {
	pods := core.Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "pods"}, GVK: schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, Namespaced: true}
	s := newSchemas(fakeCRDs{})
	pod := obj(t, `{apiVersion: v1, kind: Pod, metadata: {name: p, namespace: ns}}`)
	if got := s.couldRefuse(context.Background(), Write{Verb: Create, Resource: pods, New: pod}); got == "" {
		t.Fatal("a Pod is not refusable")
	}
	if got := s.couldRefuse(context.Background(), Write{Verb: Delete, Resource: pods, Old: pod}); got != "" {
		t.Fatalf("a delete is refusable: %s", got)
	}
}

// TestNull: hasNull finds what nullAt names.
func TestNull(t *testing.T) {
	for _, v := range []any{
		nil,
		map[string]any{},
		map[string]any{"a": map[string]any{"b": []any{int64(1), "x<y>&\u2028", nil}}},
		map[string]any{"a": []any{map[string]any{"b": 1.5e21, "c": true}}, "d": map[string]any{"e": nil}},
		map[string]any{"a": []any{[]any{"é", int64(-3)}}, "b": map[string]any{"c": map[string]any{}}},
	} {
		if got, want := hasNull(v), nullAt(v, "") != "" || v == nil; got != want {
			t.Errorf("hasNull(%v) = %v, nullAt says %v", v, got, want)
		}
	}
}
