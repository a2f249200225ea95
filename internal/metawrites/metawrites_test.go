package metawrites

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

var configMaps = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

const metadataAnswer = `{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"name":"a","namespace":"ns","resourceVersion":"7",` +
	`"managedFields":[{"manager":"uc","operation":"Apply","apiVersion":"v1","fieldsType":"FieldsV1","fieldsV1":{"f:data":{}}}]}}`

// TestWrites checks each write's request (method, path, parameters, body
// and its type, the Accept header) and what it returns of each answer: the
// metadata, the whole object of a server that cannot answer with metadata,
// and an error.
func TestWrites(t *testing.T) {
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "a", "namespace": "ns"}, "data": map[string]any{"k": "v"},
	}}
	type request struct{ method, path, query, contentType, body string }
	for _, tc := range []struct {
		name   string
		write  func(dynamic.ResourceInterface) (*unstructured.Unstructured, error)
		want   request
		status int
		answer string
		check  func(*testing.T, *unstructured.Unstructured, error)
	}{{
		name: "create answered with metadata",
		write: func(r dynamic.ResourceInterface) (*unstructured.Unstructured, error) {
			return r.Create(context.Background(), obj, metav1.CreateOptions{FieldManager: "uc", DryRun: []string{"All"}})
		},
		want:   request{"POST", "/api/v1/namespaces/ns/configmaps", "dryRun=All&fieldManager=uc", "application/json", `"data":{"k":"v"}`},
		status: http.StatusCreated, answer: metadataAnswer,
		check: wantMetadata("ConfigMap", 0),
	}, {
		name: "apply answered with metadata",
		write: func(r dynamic.ResourceInterface) (*unstructured.Unstructured, error) {
			return r.Apply(context.Background(), "a", obj, metav1.ApplyOptions{FieldManager: "uc", Force: true})
		},
		want:   request{"PATCH", "/api/v1/namespaces/ns/configmaps/a", "fieldManager=uc&force=true", "application/apply-patch+yaml", `"data":{"k":"v"}`},
		status: http.StatusOK, answer: metadataAnswer,
		check: wantMetadata("ConfigMap", 1),
	}, {
		name: "status apply",
		write: func(r dynamic.ResourceInterface) (*unstructured.Unstructured, error) {
			return r.ApplyStatus(context.Background(), "a", obj, metav1.ApplyOptions{FieldManager: "uc", Force: true})
		},
		want:   request{"PATCH", "/api/v1/namespaces/ns/configmaps/a/status", "fieldManager=uc&force=true", "application/apply-patch+yaml", `"data":{"k":"v"}`},
		status: http.StatusOK, answer: metadataAnswer,
		check: wantMetadata("ConfigMap", 1),
	}, {
		name: "patch answered with the whole object",
		write: func(r dynamic.ResourceInterface) (*unstructured.Unstructured, error) {
			return r.Patch(context.Background(), "a", types.JSONPatchType, []byte(`[]`), metav1.PatchOptions{})
		},
		want:   request{"PATCH", "/api/v1/namespaces/ns/configmaps/a", "", "application/json-patch+json", `[]`},
		status: http.StatusOK, answer: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","resourceVersion":"8"},"data":{"k":"v"}}`,
		check: func(t *testing.T, out *unstructured.Unstructured, err error) {
			if err != nil || out.GetResourceVersion() != "8" || out.Object["data"] == nil {
				t.Errorf("got %v, %v; want the whole object", out, err)
			}
		},
	}, {
		name: "update refused",
		write: func(r dynamic.ResourceInterface) (*unstructured.Unstructured, error) {
			return r.Update(context.Background(), obj, metav1.UpdateOptions{})
		},
		want:   request{"PUT", "/api/v1/namespaces/ns/configmaps/a", "", "application/json", `"kind":"ConfigMap"`},
		status: http.StatusConflict,
		answer: `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Conflict","code":409,"message":"the object has been modified"}`,
		check: func(t *testing.T, out *unstructured.Unstructured, err error) {
			if !apierrors.IsConflict(err) {
				t.Errorf("got %v, %v; want a conflict", out, err)
			}
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var got request
			var accept string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				got = request{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get("Content-Type"), string(body)}
				accept = r.Header.Get("Accept")
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tc.status)
				_, _ = io.WriteString(w, tc.answer)
			}))
			defer srv.Close()
			cfg := &rest.Config{Host: srv.URL}
			httpClient, err := rest.HTTPClientFor(cfg)
			if err != nil {
				t.Fatal(err)
			}
			dyn, err := dynamic.NewForConfigAndClient(cfg, httpClient)
			if err != nil {
				t.Fatal(err)
			}
			c, err := New(cfg, httpClient, dyn)
			if err != nil {
				t.Fatal(err)
			}
			out, err := tc.write(c.Resource(configMaps).Namespace("ns"))
			tc.check(t, out, err)
			if got.method != tc.want.method || got.path != tc.want.path || got.query != tc.want.query ||
				got.contentType != tc.want.contentType || !strings.Contains(got.body, tc.want.body) {
				t.Errorf("request %+v, want %+v", got, tc.want)
			}
			if !strings.HasPrefix(accept, "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata") {
				t.Errorf("Accept: %q, want metadata first", accept)
			}
		})
	}
}

// wantMetadata checks an answer holds the metadata, with the written
// object's apiVersion and kind, and nothing else; managedFields entries of
// them (a create's answer leaves them out).
func wantMetadata(kind string, managedFields int) func(*testing.T, *unstructured.Unstructured, error) {
	return func(t *testing.T, out *unstructured.Unstructured, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		if out.GetAPIVersion() != "v1" || out.GetKind() != kind || out.GetName() != "a" || out.GetNamespace() != "ns" ||
			out.GetResourceVersion() != "7" || len(out.Object) != 3 {
			t.Errorf("got %v, want the metadata of a %s", out.Object, kind)
		}
		mf := out.GetManagedFields()
		if len(mf) != managedFields {
			t.Fatalf("managedFields %v, want %d entries", mf, managedFields)
		}
		if managedFields > 0 && (mf[0].Manager != "uc" || mf[0].Operation != metav1.ManagedFieldsOperationApply || string(mf[0].FieldsV1.Raw) != `{"f:data":{}}`) {
			t.Errorf("managedFields %+v, want uc's apply of f:data", mf[0])
		}
	}
}
