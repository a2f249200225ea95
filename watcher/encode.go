package watcher

import (
	"encoding/json"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"universalcontroller.dev/uc/internal/ujson"
	"universalcontroller.dev/uc/schemas/hooks"
)

// encode is the JSON of an event's data: a sync request's by
// encodeRequest, which is most of the watcher's encoding.
func encode(data any) ([]byte, error) {
	if req, ok := data.(*hooks.SyncRequest); ok {
		return encodeRequest(req)
	}
	return json.Marshal(data)
}

// encodeRequest is a sync request's JSON, byte for byte json.Marshal's,
// made in one pass by ujson: json.Marshal encodes each Unstructured by its
// MarshalJSON, into a buffer of its own that it then scans and copies, and
// allocates for every map it encodes.
func encodeRequest(r *hooks.SyncRequest) ([]byte, error) {
	return ujson.Marshal(ujson.Fields{
		{Name: "controller", Value: content(r.Controller)},
		{Name: "parent", Value: content(r.Parent)},
		{Name: "children", Value: groupContent(r.Children)},
		{Name: "related", Value: groupContent(r.Related)},
		{Name: "finalizing", Value: r.Finalizing},
	})
}

// content is the map of u: nil, encoded null, as a nil u.
func content(u *unstructured.Unstructured) map[string]any {
	if u == nil {
		return nil
	}
	return u.Object
}

// groupContent is g with each object's map in place of the object.
func groupContent(g hooks.GroupedObjects) map[string]any {
	if g == nil {
		return nil
	}
	out := make(map[string]any, len(g))
	for kind, objs := range g {
		if objs == nil {
			out[kind] = nil
			continue
		}
		m := make(map[string]any, len(objs))
		for key, u := range objs {
			m[key] = content(u)
		}
		out[kind] = m
	}
	return out
}
