package core

import (
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// PartitionLabel is the value of v1alpha1.LabelPartition on the parent of
// that UID and on its children and revisions, for a controller whose
// watchers are sharded; false when they are not (Controller.Partitions is
// 0).
func (c *Controller) PartitionLabel(parent types.UID) (string, bool) {
	if c.Partitions == 0 {
		return "", false
	}
	return strconv.Itoa(bus.Partition(parent, c.Partitions)), true
}

// labelPartition labels obj, one of the parent's objects uc writes, with the
// parent's partition when the controller's watchers are sharded. The label
// is no part of what uc compares or hashes (comparable, setAppliedHash):
// sharding turned on re-creates no child, and a child whose label someone
// changed is labelled again on its own (the applier's labeller).
func (c *Controller) labelPartition(obj metav1.Object, parent types.UID) {
	value, ok := c.PartitionLabel(parent)
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
