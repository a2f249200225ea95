package core

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

// The claim rule, Metacontroller's: a parent's children are the objects of
// its child kinds, in its namespace, that it controls and its selector
// matches, and the orphans it may adopt. The watcher shows a hook the
// objects its parent claims; the applier adopts a claimed orphan the hook
// wants and deletes one it does not. Both decide with these two functions.

// Claims tells whether the parent with that UID and selector claims obj as
// its child: it controls obj and sel matches it, or obj is Adoptable.
func Claims(parent types.UID, sel labels.Selector, obj *unstructured.Unstructured) bool {
	if ref := metav1.GetControllerOfNoCopy(obj); ref != nil {
		return ref.UID == parent && sel.Matches(LabelsOf(obj))
	}
	return Adoptable(sel, obj)
}

// Adoptable tells whether a parent whose selector is sel may adopt Object: no
// one controls it, it is not being deleted and sel matches it.
func Adoptable(sel labels.Selector, obj *unstructured.Unstructured) bool {
	return metav1.GetControllerOfNoCopy(obj) == nil && obj.GetDeletionTimestamp() == nil && sel.Matches(LabelsOf(obj))
}

// LabelsOf are obj's labels, read in place (GetLabels copies them), for a
// selector to match. A label whose value is null has the value "", as
// GetLabels has it.
func LabelsOf(obj *unstructured.Unstructured) labels.Labels {
	m, _, _ := unstructured.NestedFieldNoCopy(obj.Object, "metadata", "labels")
	l, _ := m.(map[string]any)
	return objectLabels(l)
}

// objectLabels are the labels of an unstructured object.
type objectLabels map[string]any

func (l objectLabels) Has(label string) bool {
	_, ok := l.Lookup(label)
	return ok
}

func (l objectLabels) Get(label string) string {
	v, _ := l.Lookup(label)
	return v
}

func (l objectLabels) Lookup(label string) (string, bool) {
	switch v := l[label].(type) {
	case string:
		return v, true
	case nil:
		_, ok := l[label]
		return "", ok
	}
	return "", false
}
