package watcher

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"universalcontroller.dev/uc/schemas/hooks"
)

// TestEncodeAsMarshal: encodeRequest writes json.Marshal's bytes, on requests
// the watcher's golden files hold, on a Pod written by hand the way the
// apiserver writes it, and on values encoding/json escapes or formats
// with care.
func TestEncodeAsMarshal(t *testing.T) {
	if n := reflect.TypeFor[hooks.SyncRequest]().NumField(); n != 5 {
		t.Fatalf("hooks.SyncRequest has %d fields; encodeRequest encodes 5: encode the new one", n)
	}
	pod := objectFile(t, "../internal/compact/testdata/pod.json")
	tricky := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Odd",
		"metadata": map[string]any{"name": "odd", "annotations": map[string]any{"html": "<a href=\"x\">&amp;</a>", "sep": "line\u2028para\u2029", "ctl": "\x01\t\n"}},
		"spec":     map[string]any{"big": 1e21, "small": 1e-7, "int": int64(-9007199254740993), "float": 2.5, "null": nil, "list": []any{true, false, nil, "é", map[string]any{}}, "empty": []any{}},
	}}
	cases := map[string]*hooks.SyncRequest{
		"empty":        {},
		"nil objects":  {Children: hooks.GroupedObjects{"Pod.v1": nil, "ConfigMap.v1": hooks.ObjectMap{"a": nil}}, Related: hooks.GroupedObjects{}},
		"nil contents": {Controller: &unstructured.Unstructured{}, Parent: &unstructured.Unstructured{}},
		"pod and odd": {Controller: tricky, Parent: pod, Finalizing: true,
			Children: hooks.GroupedObjects{"Pod.v1": hooks.ObjectMap{"shop/web": pod}, "Odd.example.com/v1": hooks.ObjectMap{"odd": tricky}},
			Related:  hooks.GroupedObjects{"Odd.example.com/v1": hooks.ObjectMap{"odd": tricky}}},
	}
	golden, err := filepath.Glob("testdata/*-request-*.json")
	if err != nil || len(golden) == 0 {
		t.Fatalf("no golden requests: %v", err)
	}
	for _, path := range golden {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var req hooks.SyncRequest
		if err := json.Unmarshal(raw, &req); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		cases[filepath.Base(path)] = &req
	}
	for name, req := range cases {
		t.Run(name, func(t *testing.T) {
			want, err := json.Marshal(req)
			if err != nil {
				t.Fatal(err)
			}
			got, err := encodeRequest(req)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("encodeRequest:\n%s\njson.Marshal:\n%s", got, want)
			}
		})
	}
}

func objectFile(t *testing.T, path string) *unstructured.Unstructured {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(raw); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return u
}
