package compact

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"universalcontroller.dev/uc/internal/ujson"
)

// Metadata is m as unstructured metadata, as runtime's converter makes it
// but without managedFields, and without its reflection.
func Metadata(m *metav1.ObjectMeta) map[string]any {
	return metadata(m, stringMap(m.Labels), stringMap(m.Annotations))
}

// metadata is m, with labels and annotations, as unstructured metadata:
// the map runtime's converter makes of it (TestMetadataAsTheConverter holds them together), without its
// reflection: every decoding of a cached object converts its metadata, and
// the converter took more time than the JSON of the rest of the object.
// managedFields are left out: the caches drop them. So are empty lists
// and maps, as the converter leaves them out (omitempty).
func metadata(m *metav1.ObjectMeta, labels, annotations map[string]any) map[string]any {
	out := make(map[string]any, 8)
	//lint:ignore SA1019 no apiserver sets selfLink since 1.20, but an aggregated API may: it is kept as it came
	selfLink := m.SelfLink
	for _, f := range [...]struct{ k, v string }{
		{"name", m.Name}, {"generateName", m.GenerateName}, {"namespace", m.Namespace},
		{"selfLink", selfLink}, {"uid", string(m.UID)}, {"resourceVersion", m.ResourceVersion},
	} {
		if f.v != "" {
			out[f.k] = f.v
		}
	}
	if m.Generation != 0 {
		out["generation"] = m.Generation
	}
	if !m.CreationTimestamp.IsZero() {
		out["creationTimestamp"] = m.CreationTimestamp.UTC().Format(time.RFC3339)
	}
	if m.DeletionTimestamp != nil {
		out["deletionTimestamp"] = m.DeletionTimestamp.UTC().Format(time.RFC3339)
	}
	if m.DeletionGracePeriodSeconds != nil {
		out["deletionGracePeriodSeconds"] = *m.DeletionGracePeriodSeconds
	}
	if len(labels) > 0 {
		out["labels"] = labels
	}
	if len(annotations) > 0 {
		out["annotations"] = annotations
	}
	if len(m.OwnerReferences) > 0 {
		out["ownerReferences"] = OwnerReferences(m.OwnerReferences)
	}
	if len(m.Finalizers) > 0 {
		fs := make([]any, len(m.Finalizers))
		for i, f := range m.Finalizers {
			fs[i] = f
		}
		out["finalizers"] = fs
	}
	return out
}

// stringMap is m as an unstructured object's map; nil when m is empty.
func stringMap(m map[string]string) map[string]any {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// OwnerReferences are refs as unstructured metadata's ownerReferences, as
// runtime's converter makes them (Unstructured.SetOwnerReferences), without
// its reflection.
func OwnerReferences(refs []metav1.OwnerReference) []any {
	out := make([]any, len(refs))
	for i, r := range refs {
		ref := map[string]any{"apiVersion": r.APIVersion, "kind": r.Kind, "name": r.Name, "uid": string(r.UID)}
		if r.Controller != nil {
			ref["controller"] = *r.Controller
		}
		if r.BlockOwnerDeletion != nil {
			ref["blockOwnerDeletion"] = *r.BlockOwnerDeletion
		}
		out[i] = ref
	}
	return out
}

// ManagedFields are entries as unstructured metadata's managedFields, as
// runtime's converter makes them (Unstructured.SetManagedFields), without
// its reflection: a fieldsV1 is decoded from its JSON, once.
func ManagedFields(entries []metav1.ManagedFieldsEntry) ([]any, error) {
	out := make([]any, len(entries))
	for i, e := range entries {
		m := make(map[string]any, 7)
		for _, f := range [...]struct{ k, v string }{
			{"manager", e.Manager}, {"operation", string(e.Operation)}, {"apiVersion", e.APIVersion},
			{"fieldsType", e.FieldsType}, {"subresource", e.Subresource},
		} {
			if f.v != "" {
				m[f.k] = f.v
			}
		}
		if e.Time != nil {
			m["time"] = e.Time.UTC().Format(time.RFC3339)
		}
		if e.FieldsV1 != nil {
			var fields any
			if len(e.FieldsV1.Raw) > 0 {
				var err error
				if fields, err = ujson.Decode(e.FieldsV1.Raw); err != nil {
					return nil, fmt.Errorf("fieldsV1 of %s: %w", e.Manager, err)
				}
			}
			m["fieldsV1"] = fields
		}
		out[i] = m
	}
	return out, nil
}
