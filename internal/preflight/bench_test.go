package preflight

import (
	"context"
	"testing"
)

// BenchmarkConfigMapCheck measures the check of each ConfigMap the applier
// writes: created, and applied over the live one as the cache holds it
// (an update wave's write), with the labels, annotations and owner uc
// gives a child.
func BenchmarkConfigMapCheck(b *testing.B) {
	const meta = `name: fanout-1-0, namespace: ns,
		labels: {app: fanout, fanout: fanout-1, uc.universalcontroller.dev/partition: "7"},
		annotations: {uc.universalcontroller.dev/applied-hash: 0a1b2c3d4e5f6a7b},
		ownerReferences: [{apiVersion: example.com/v1, kind: Fanout, name: fanout-1, uid: 5f0c3a1e-8a4b-4f0e-9d55-0e6f3b1c2d4a, controller: true, blockOwnerDeletion: true}]`
	desired := obj(b, `{apiVersion: v1, kind: ConfigMap, metadata: {`+meta+`}, data: {payload: "payload of generation 2"}}`)
	live := obj(b, `{apiVersion: v1, kind: ConfigMap, metadata: {`+meta+`, uid: 0d7e1c2b-3a4f-4e5d-8c6b-7a8f9e0d1c2b,
		resourceVersion: "123456", creationTimestamp: "2026-11-30T10:00:00Z"}, data: {payload: "payload of generation 1"}}`)
	s := newSchemas(nil)
	for _, tc := range []struct {
		name string
		w    Write
	}{
		{"create", Write{Verb: Create, Resource: configMaps, New: desired}},
		{"apply", Write{Verb: Apply, Resource: configMaps, New: desired, Old: live}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if why := s.couldRefuse(context.Background(), tc.w); why != "" {
					b.Fatal(why)
				}
			}
		})
	}
}
