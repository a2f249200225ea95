package preflight

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
)

// TestDecodeAsTheConverter: a ConfigMap or metadata decoded by hand is what
// runtime's converter makes of it, and what the hand decoding leaves to
// the converter gets the converter's error.
func TestDecodeAsTheConverter(t *testing.T) {
	const meta = `name: fanout-1-0, namespace: ns, generateName: fanout-1-,
		labels: {app: fanout, uc.universalcontroller.dev/partition: "7"},
		annotations: {uc.universalcontroller.dev/applied-hash: 0a1b2c3d4e5f6a7b, empty: ""},
		finalizers: [example.com/keep],
		ownerReferences: [{apiVersion: example.com/v1, kind: Fanout, name: fanout-1, uid: 5f0c3a1e, controller: true, blockOwnerDeletion: false},
			{apiVersion: v1, kind: Pod, name: p, uid: u2}]`
	for _, tc := range []struct {
		name   string
		obj    string
		simple bool   // decoded by hand
		err    string // in the converter's error; "" for none
	}{
		{name: "uc's child", obj: `{apiVersion: v1, kind: ConfigMap, metadata: {` + meta + `}, data: {payload: p, other: ""}}`, simple: true},
		{name: "empty maps and lists", obj: `{apiVersion: v1, kind: ConfigMap, metadata: {name: a, labels: {}, annotations: {}, finalizers: [], ownerReferences: []}, data: {}}`, simple: true},
		{name: "nothing but its type", obj: `{apiVersion: v1, kind: ConfigMap}`, simple: true},
		{name: "binary data", obj: `{apiVersion: v1, kind: ConfigMap, metadata: {name: a}, binaryData: {k: dg==}}`},
		{name: "immutable", obj: `{apiVersion: v1, kind: ConfigMap, metadata: {name: a}, immutable: true}`},
		{name: "a uid", obj: `{apiVersion: v1, kind: ConfigMap, metadata: {name: a, uid: u1, resourceVersion: "5"}}`},
		{name: "unknown field", obj: `{apiVersion: v1, kind: ConfigMap, metadata: {name: a}, spec: {}}`, err: "unknown field"},
		{name: "unknown metadata field", obj: `{apiVersion: v1, kind: ConfigMap, metadata: {name: a, colour: red}}`, err: "unknown field"},
		{name: "unknown owner field", obj: `{apiVersion: v1, kind: ConfigMap, metadata: {name: a, ownerReferences: [{name: o, colour: red}]}}`, err: "unknown field"},
		{name: "a number for a string", obj: `{apiVersion: v1, kind: ConfigMap, metadata: {name: a}, data: {key: 5}}`, err: "unrecognized type"},
		{name: "a label of a number", obj: `{apiVersion: v1, kind: ConfigMap, metadata: {name: a, labels: {a: 1}}}`, err: "unrecognized type"},
		{name: "a string for a flag", obj: `{apiVersion: v1, kind: ConfigMap, metadata: {name: a, ownerReferences: [{name: o, controller: "yes"}]}}`, err: "unrecognized type"},
		{name: "a map for a list", obj: `{apiVersion: v1, kind: ConfigMap, metadata: {name: a, finalizers: {a: b}}}`, err: "cannot restore slice"},
		{name: "a list for the metadata", obj: `{apiVersion: v1, kind: ConfigMap, metadata: [a]}`, err: "cannot restore struct"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := obj(t, tc.obj).Object
			if simple := simpleConfigMap(in, &corev1.ConfigMap{}); simple != tc.simple {
				t.Errorf("decoded by hand: %t, want %t", simple, tc.simple)
			}
			var want corev1.ConfigMap
			wantErr := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(in, &want, true)
			if tc.err == "" && wantErr != nil || tc.err != "" && (wantErr == nil || !strings.Contains(wantErr.Error(), tc.err)) {
				t.Fatalf("the converter's error: %v, want %q", wantErr, tc.err)
			}
			got, err := decodeConfigMap(in)
			if wantErr != nil {
				if err == nil || err.Error() != wantErr.Error() {
					t.Errorf("error %v, want the converter's %v", err, wantErr)
				}
				return
			}
			if err != nil || !equality.Semantic.DeepEqual(got, &want) {
				t.Errorf("decoded %v:\n%s", err, cmp.Diff(&want, got))
			}
			if meta, ok := in["metadata"].(map[string]any); ok {
				m, err := decodeMeta(meta)
				if err != nil || !equality.Semantic.DeepEqual(m, want.ObjectMeta) {
					t.Errorf("metadata decoded %v:\n%s", err, cmp.Diff(want.ObjectMeta, m))
				}
			}
		})
	}
}
