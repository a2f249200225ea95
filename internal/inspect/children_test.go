package inspect

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

// configMap is a ConfigMap with labels, controlled by the object of uid
// owner (none when empty).
func configMap(name string, lbls map[string]string, owner types.UID) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("v1")
	u.SetKind("ConfigMap")
	u.SetNamespace("ns")
	u.SetName(name)
	u.SetLabels(lbls)
	if owner != "" {
		yes := true
		u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "e2e.universalcontroller.dev/v1", Kind: "Composite", Name: "owner-" + string(owner), UID: owner, Controller: &yes}})
	}
	return u
}

// TestChildOf: what an object of a child kind is to the parent, by its
// controller and the parent's selector.
func TestChildOf(t *testing.T) {
	parent := parentWithUID("p")
	web := map[string]string{"app": "web"}
	sel := labels.SelectorFromSet(web)
	deleting := configMap("gone", web, "")
	deleting.SetDeletionTimestamp(&metav1.Time{Time: at})
	for _, tc := range []struct {
		name string
		obj  *unstructured.Unstructured
		sel  labels.Selector
		want string // State, and Owner; "": not the parent's
	}{
		{"owned", configMap("a", web, "p"), sel, Owned},
		{"owned, no longer selected", configMap("a", nil, "p"), sel, Released},
		{"owned by a parent without a selector", configMap("a", nil, "p"), nil, Owned},
		{"an orphan it selects", configMap("a", web, ""), sel, Adoptable},
		{"an orphan on its way out", deleting, sel, ""},
		{"an orphan it does not select", configMap("a", nil, ""), sel, ""},
		{"an orphan, the parent without a selector", configMap("a", web, ""), nil, ""},
		{"another's it selects", configMap("a", web, "q"), sel, OwnedByOther + " Composite/owner-q"},
		{"another's it does not select", configMap("a", nil, "q"), sel, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, ok := childOf(tc.obj, parent, tc.sel, "uc/shop")
			got := strings.TrimSpace(c.State + " " + c.Owner)
			if !ok {
				got = ""
			}
			if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestDrift: another field manager's write after uc's, outside metadata
// and status, is drift; one before uc's, a status write or a metadata
// write (the Deployment controller's revision annotation) is not.
func TestDrift(t *testing.T) {
	entry := func(manager string, op metav1.ManagedFieldsOperationType, offset time.Duration, fields, subresource string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: op, Time: &metav1.Time{Time: at.Add(offset)},
			FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(fields)}, Subresource: subresource}
	}
	entries := []metav1.ManagedFieldsEntry{
		entry("uc/shop", metav1.ManagedFieldsOperationUpdate, -time.Hour, `{"f:data":{"f:a":{},"f:b":{}}}`, ""), // its create
		entry("uc/shop", metav1.ManagedFieldsOperationApply, -time.Minute, `{"f:data":{"f:a":{}}}`, ""),
		entry("kubectl-edit", metav1.ManagedFieldsOperationUpdate, -time.Second, `{"f:data":{"f:b":{}},"f:spec":{"f:replicas":{}},"f:immutable":{}}`, ""),
		entry("kube-controller-manager", metav1.ManagedFieldsOperationUpdate, -time.Second, `{"f:metadata":{"f:annotations":{}}}`, ""),
		entry("kube-controller-manager", metav1.ManagedFieldsOperationUpdate, -time.Second, `{"f:status":{"f:ready":{}}}`, "status"),
		entry("before", metav1.ManagedFieldsOperationUpdate, -2*time.Minute, `{"f:data":{"f:c":{}}}`, ""),
	}
	written, changes := drift(entries, "uc/shop")
	if written == nil || !written.Equal(at.Add(-time.Minute)) {
		t.Fatalf("uc wrote it at %v, want its last entry's time", written)
	}
	if len(changes) != 1 || changes[0].Manager != "kubectl-edit" || strings.Join(changes[0].Fields, ",") != "data.b,immutable,spec.replicas" {
		t.Fatalf("drift %+v, want kubectl-edit's data.b, immutable and spec.replicas", changes)
	}
	if written, changes := drift(entries[2:3], "uc/shop"); written != nil || len(changes) != 1 {
		t.Fatalf("a child uc never wrote: written %v, drift %+v; want every other write", written, changes)
	}
}
