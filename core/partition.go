package core

import (
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// Partition is the partition a parent is in, of partitions: the one whose
// watcher publishes its requests and whose applier applies its replies.
// When the controller's watchers are sharded (Partitions is not 0) it is
// the parent's own label when that names a partition, so that a parent
// that is another parent's child (nested controllers) stays with its
// parent's tree, and a parent whose label someone changed by hand takes its
// children along; else, and always when they are not sharded,
// bus.Partition of the parent's UID.
func (c *Controller) Partition(parent metav1.Object, partitions int) int {
	if c.Partitions != 0 {
		if label := parent.GetLabels()[v1alpha1.LabelPartition]; c.ValidPartition(label) {
			n, _ := strconv.Atoi(label)
			return n
		}
		partitions = c.Partitions
	}
	return bus.Partition(parent.GetUID(), partitions)
}

// PartitionOf is the value of v1alpha1.LabelPartition on a parent and on
// its children and revisions — its Partition — for a controller whose
// watchers are sharded; false when they are not.
func (c *Controller) PartitionOf(parent metav1.Object) (string, bool) {
	if c.Partitions == 0 {
		return "", false
	}
	return strconv.Itoa(c.Partition(parent, c.Partitions)), true
}

// ValidPartition tells whether label, a value of v1alpha1.LabelPartition,
// names one of the controller's partitions: a number from 0 to
// Partitions-1, written as strconv writes it.
func (c *Controller) ValidPartition(label string) bool {
	n, err := strconv.Atoi(label)
	return err == nil && n >= 0 && n < c.Partitions && strconv.Itoa(n) == label
}

// labelPartition labels obj, one of the parent's objects uc writes, with the
// parent's partition when the controller's watchers are sharded. The label
// is no part of what uc compares or hashes (comparable, setAppliedHash):
// sharding turned on re-creates no child, and a child whose label someone
// changed is labelled again on its own (the applier's labeller).
func (c *Controller) labelPartition(obj, parent metav1.Object) {
	value, ok := c.PartitionOf(parent)
	if !ok {
		return
	}
	lbls := obj.GetLabels()
	if lbls == nil {
		lbls = map[string]string{}
	}
	lbls[v1alpha1.LabelPartition] = value
	obj.SetLabels(lbls)
}
