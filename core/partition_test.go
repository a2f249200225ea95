package core

import (
	"strconv"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// TestPartitionLabel: with sharded watchers, what uc creates carries the
// parent's partition; the label is no difference to update on, so that
// turning sharding on, or someone removing the label, re-creates nothing.
func TestPartitionLabel(t *testing.T) {
	parent := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Parent"}}
	parent.SetNamespace("ns")
	parent.SetName("p")
	parent.SetUID("parent-uid")
	want := map[bool]string{true: strconv.Itoa(bus.Partition("parent-uid", 8)), false: ""}
	desired := func() *unstructured.Unstructured {
		return object("ConfigMap", "", "a", map[string]any{"k": "1"}, "")
	}
	for _, sharded := range []bool{false, true} {
		ctl := testController(v1alpha1.ChildUpdateRecreate)
		if sharded {
			ctl.Partitions = 8
		}
		// Created: labelled only when sharded.
		writes, err := Plan(ctl, parent, &hooks.SyncResponse{Children: []*unstructured.Unstructured{desired()}}, fakeLive{})
		if err != nil || len(writes) != 1 || writes[0].Verb != VerbCreate {
			t.Fatalf("sharded=%v: writes %v, %v; want one create", sharded, writes, err)
		}
		if got := writes[0].Object.GetLabels()[v1alpha1.LabelPartition]; got != want[sharded] {
			t.Errorf("sharded=%v: created child's partition label %q, want %q", sharded, got, want[sharded])
		}
		// A child as applied by the other setting, or with its label
		// edited: nothing to write, even for Recreate.
		for _, label := range []string{"", "7", want[!sharded]} {
			other := testController(v1alpha1.ChildUpdateRecreate)
			live, err := desiredObject(other, parent, &other.Children[0], desired(), ownerRef(other, parent))
			if err != nil {
				t.Fatal(err)
			}
			lbls := live.GetLabels()
			if label != "" {
				lbls[v1alpha1.LabelPartition] = label
			}
			live.SetLabels(lbls)
			live.SetUID("child-uid")
			writes, err := Plan(ctl, parent, &hooks.SyncResponse{Children: []*unstructured.Unstructured{desired()}}, fakeLive{live})
			if err != nil || len(writes) != 0 {
				t.Errorf("sharded=%v, live label %q: writes %v, %v; want none", sharded, label, writes, err)
			}
		}
	}
}

func TestPartitionOf(t *testing.T) {
	hashed := strconv.Itoa(bus.Partition("parent-uid", 8))
	tests := []struct {
		name       string
		partitions int
		label      *string
		want       string
		sharded    bool
	}{
		{name: "not sharded", partitions: 0, want: "", sharded: false},
		{name: "unlabelled: the UID's partition", partitions: 8, want: hashed, sharded: true},
		{name: "labelled: its own label (a nested parent, or one moved by hand)", partitions: 8, label: ptr("5"), want: "5", sharded: true},
		{name: "a label out of range is not a partition", partitions: 8, label: ptr("8"), want: hashed, sharded: true},
		{name: "a label that is no number is not a partition", partitions: 8, label: ptr("five"), want: hashed, sharded: true},
		{name: "a number not written as strconv writes it is not a partition", partitions: 8, label: ptr("05"), want: hashed, sharded: true},
		{name: "a negative number is not a partition", partitions: 8, label: ptr("-1"), want: hashed, sharded: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parent := &unstructured.Unstructured{Object: map[string]any{}}
			parent.SetUID("parent-uid")
			if tt.label != nil {
				parent.SetLabels(map[string]string{v1alpha1.LabelPartition: *tt.label})
			}
			ctl := &Controller{Partitions: tt.partitions}
			got, ok := ctl.PartitionOf(parent)
			if got != tt.want || ok != tt.sharded {
				t.Errorf("PartitionOf = %q, %v; want %q, %v", got, ok, tt.want, tt.sharded)
			}
			// Partition agrees; unsharded, the UID decides whatever the label.
			want := strconv.Itoa(bus.Partition("parent-uid", 8))
			if tt.sharded {
				want = tt.want
			}
			if n := ctl.Partition(parent, 8); strconv.Itoa(n) != want {
				t.Errorf("Partition = %d, want %s", n, want)
			}
		})
	}
}
func ptr[T any](v T) *T { return &v }
