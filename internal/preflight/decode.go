package preflight

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// Every object the applier is to write is decoded into its Go type before
// it is validated, and runtime's converter, which reflects over each field
// and reports the unknown ones, took more time than the validation itself
// (an eighth of the applier's allocations at 1,000 parents). The objects
// uc writes have the same few fields: a name, a namespace, labels,
// annotations, owners and finalizers, and a ConfigMap's data. decodeMeta
// and decodeConfigMap read those by hand; an object with any other field,
// or a field of another type, is left to the converter, which says what is
// wrong with it as the apiserver's decoding would.

// decodeMeta decodes an object's metadata, refusing a field ObjectMeta
// does not have.
func decodeMeta(raw map[string]any) (metav1.ObjectMeta, error) {
	var m metav1.ObjectMeta
	if simpleMeta(raw, &m) {
		return m, nil
	}
	m = metav1.ObjectMeta{}
	err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(raw, &m, true)
	return m, err
}

// decodeConfigMap decodes a ConfigMap, refusing a field it does not have.
func decodeConfigMap(obj map[string]any) (*corev1.ConfigMap, error) {
	cm := &corev1.ConfigMap{}
	if simpleConfigMap(obj, cm) {
		return cm, nil
	}
	cm = &corev1.ConfigMap{}
	err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(obj, cm, true)
	return cm, err
}

// simpleConfigMap decodes obj into cm and says true when obj has no field
// but apiVersion, kind, metadata (a simple one) and data, each of its type.
func simpleConfigMap(obj map[string]any, cm *corev1.ConfigMap) bool {
	for k, v := range obj {
		var ok bool
		switch k {
		case "apiVersion":
			cm.APIVersion, ok = v.(string)
		case "kind":
			cm.Kind, ok = v.(string)
		case "metadata":
			var raw map[string]any
			raw, ok = v.(map[string]any)
			ok = ok && simpleMeta(raw, &cm.ObjectMeta)
		case "data":
			var exists bool
			var err error
			cm.Data, exists, err = unstructured.NestedStringMap(obj, k)
			ok = found(exists, err)
		}
		if !ok {
			return false
		}
	}
	return true
}

// simpleMeta decodes raw into m and says true when raw has no field but a
// name, generateName, namespace, labels, annotations, finalizers and
// ownerReferences, each of its type.
func simpleMeta(raw map[string]any, m *metav1.ObjectMeta) bool {
	for k, v := range raw {
		ok, exists, err := false, false, error(nil)
		switch k {
		case "name":
			m.Name, ok = v.(string)
		case "generateName":
			m.GenerateName, ok = v.(string)
		case "namespace":
			m.Namespace, ok = v.(string)
		case "labels":
			m.Labels, exists, err = unstructured.NestedStringMap(raw, k)
		case "annotations":
			m.Annotations, exists, err = unstructured.NestedStringMap(raw, k)
		case "finalizers":
			m.Finalizers, exists, err = unstructured.NestedStringSlice(raw, k)
		case "ownerReferences":
			m.OwnerReferences, ok = ownerReferences(v)
		}
		if !ok && !found(exists, err) {
			return false
		}
	}
	return true
}

// found is whether one of unstructured's Nested getters found a field of
// its type.
func found(exists bool, err error) bool { return exists && err == nil }

func ownerReferences(v any) ([]metav1.OwnerReference, bool) {
	in, ok := v.([]any)
	if !ok {
		return nil, false
	}
	out := make([]metav1.OwnerReference, len(in))
	for i, x := range in {
		ref, ok := x.(map[string]any)
		if !ok {
			return nil, false
		}
		for k, f := range ref {
			r := &out[i]
			switch k {
			case "apiVersion":
				r.APIVersion, ok = f.(string)
			case "kind":
				r.Kind, ok = f.(string)
			case "name":
				r.Name, ok = f.(string)
			case "uid":
				var uid string
				uid, ok = f.(string)
				r.UID = types.UID(uid)
			case "controller":
				r.Controller, ok = flag(f)
			case "blockOwnerDeletion":
				r.BlockOwnerDeletion, ok = flag(f)
			default:
				ok = false
			}
			if !ok {
				return nil, false
			}
		}
	}
	return out, true
}

func flag(v any) (*bool, bool) {
	b, ok := v.(bool)
	return &b, ok
}
