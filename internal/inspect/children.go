package inspect

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"

	"universalcontroller.dev/uc/core"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// Child is an object of a declared child kind that is the parent's, or
// that it could adopt or claims in vain.
type Child struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
	State      string `json:"state"`
	// Owner names the controller of a child another object controls.
	Owner string `json:"owner,omitempty"`
	// Deleting: it has a deletionTimestamp.
	Deleting bool `json:"deleting,omitempty"`
	// Written is when uc last wrote it (its field manager's last entry).
	Written *time.Time `json:"written,omitempty"`
	// Drift lists the changes other field managers made to it since.
	Drift []Change `json:"drift,omitempty"`
}

// The states of a child.
const (
	// Owned: the parent controls it and its selector matches it.
	Owned = "owned"
	// Released: the parent controls it but its selector no longer
	// matches it; the applier lets it go.
	Released = "owned, not selected: to be released"
	// Adoptable: nothing controls it and the parent's selector matches
	// it; the applier adopts it if the hook wants it.
	Adoptable = "adoptable orphan"
	// OwnedByOther: the parent's selector matches it, but another object
	// controls it; the parent never takes it.
	OwnedByOther = "controlled by another object"
)

// Change is a write of another field manager to a child after uc's last
// write, outside its metadata and status: a change the hook's next reply
// undoes.
type Change struct {
	Manager   string    `json:"manager"`
	Operation string    `json:"operation"`
	Time      time.Time `json:"time"`
	// Fields are the fields it owns, as paths (spec.replicas).
	Fields []string `json:"fields"`
}

// children lists the parent's children of every declared kind, and the
// objects its selector matches that it could adopt or that another object
// controls.
func (c *Cluster) children(ctx context.Context, ctl *core.Controller, parent *unstructured.Unstructured) ([]Child, error) {
	sel, selErr := ctl.Selector(parent)
	var out []Child
	for _, res := range ctl.Children {
		ns := parent.GetNamespace()
		listSel := labels.Everything()
		if !ctl.Parent.Namespaced && selErr == nil {
			listSel = sel // in every namespace: those the parent may have
		}
		objs, err := c.list(ctx, res.Resource, ns, listSel)
		if err != nil {
			return nil, err
		}
		for i := range objs {
			if child, ok := childOf(&objs[i], parent, sel, v1alpha1.FieldManager(ctl.Name)); ok {
				out = append(out, child)
			}
		}
	}
	slices.SortFunc(out, func(a, b Child) int {
		return strings.Compare(a.Kind+"/"+a.Namespace+"/"+a.Name, b.Kind+"/"+b.Namespace+"/"+b.Name)
	})
	if selErr != nil {
		return out, selErr
	}
	return out, nil
}

// childOf tells what obj is to the parent, whose selector is sel (nil:
// it has none): not a child of it at all when false. manager is uc's field
// manager of the controller.
func childOf(obj, parent *unstructured.Unstructured, sel labels.Selector, manager string) (Child, bool) {
	selected := sel != nil && sel.Matches(labels.Set(obj.GetLabels()))
	child := Child{APIVersion: obj.GetAPIVersion(), Kind: obj.GetKind(), Namespace: obj.GetNamespace(), Name: obj.GetName(),
		Deleting: obj.GetDeletionTimestamp() != nil}
	ref := metav1.GetControllerOfNoCopy(obj)
	switch {
	case ref != nil && ref.UID == parent.GetUID() && (selected || sel == nil):
		child.State = Owned
	case ref != nil && ref.UID == parent.GetUID():
		child.State = Released
	case !selected:
		return Child{}, false
	case ref == nil && !child.Deleting:
		child.State = Adoptable
	case ref == nil:
		return Child{}, false // an orphan on its way out
	default:
		child.State, child.Owner = OwnedByOther, ref.Kind+"/"+ref.Name
	}
	child.Written, child.Drift = drift(obj.GetManagedFields(), manager)
	return child, true
}

// drift reads, from an object's managed fields, when manager last wrote
// it, and the writes of other managers after that outside metadata and
// status (a status subresource's writes are never drift).
func drift(entries []metav1.ManagedFieldsEntry, manager string) (*time.Time, []Change) {
	var written *time.Time
	for _, e := range entries {
		if e.Manager == manager && e.Time != nil && (written == nil || e.Time.After(*written)) {
			written = &e.Time.Time
		}
	}
	var changes []Change
	for _, e := range entries {
		if e.Manager == manager || e.Subresource != "" || e.Time == nil || written != nil && !e.Time.After(*written) {
			continue
		}
		if paths := fieldPaths(e.FieldsV1); len(paths) > 0 {
			changes = append(changes, Change{Manager: e.Manager, Operation: string(e.Operation), Time: e.Time.Time, Fields: paths})
		}
	}
	return written, changes
}

// fieldPaths are the fields of a managed fields set, two levels deep,
// outside metadata and status: data.key, spec.replicas.
func fieldPaths(set *metav1.FieldsV1) []string {
	if set == nil {
		return nil
	}
	var top map[string]map[string]any
	if err := json.Unmarshal(set.Raw, &top); err != nil {
		return nil
	}
	var paths []string
	for key, sub := range top {
		name, ok := strings.CutPrefix(key, "f:")
		if !ok || name == "metadata" || name == "status" || name == "apiVersion" || name == "kind" {
			continue
		}
		var below []string
		for k := range sub {
			if n, ok := strings.CutPrefix(k, "f:"); ok {
				below = append(below, name+"."+n)
			}
		}
		if len(below) == 0 {
			below = []string{name}
		}
		paths = append(paths, below...)
	}
	slices.Sort(paths)
	return paths
}

// Event is one of the parent's Events.
type Event struct {
	Type    string    `json:"type"`
	Reason  string    `json:"reason"`
	Message string    `json:"message"`
	Count   int32     `json:"count,omitempty"`
	Last    time.Time `json:"last"`
}

// events are the parent's n latest Events, the oldest first.
func (c *Cluster) events(ctx context.Context, parent *unstructured.Unstructured, n int) ([]Event, error) {
	if n <= 0 {
		return nil, nil
	}
	ns := parent.GetNamespace()
	if ns == "" {
		ns = metav1.NamespaceDefault // where a cluster-scoped object's Events go
	}
	list, err := c.kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("involvedObject.uid", string(parent.GetUID())).String()})
	if err != nil {
		return nil, fmt.Errorf("list the Events of %s: %w", parent.GetName(), err)
	}
	out := make([]Event, 0, len(list.Items))
	for _, e := range list.Items {
		out = append(out, Event{Type: e.Type, Reason: e.Reason, Message: e.Message, Count: e.Count, Last: lastSeen(&e)})
	}
	slices.SortStableFunc(out, func(a, b Event) int { return a.Last.Compare(b.Last) })
	return out[max(0, len(out)-n):], nil
}

// lastSeen is when an Event last happened.
func lastSeen(e *corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}
