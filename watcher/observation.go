package watcher

import (
	"strconv"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"universalcontroller.dev/uc/core"
	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// A request's observation (bus.Meta.Observation) orders the observations
// of one parent, and the appliers never apply a reply of an older one after
// a newer one (the fence). It is what the apiserver says, never a clock:
// the newest resourceVersion the watcher's caches had heard of when the
// request was built — the last one each informer of the controller's
// parent and child resources heard (its list's, a watch event's, a
// bookmark's) and every resourceVersion in the request. So
//
//   - every object the request observed is at or below it, and anything
//     written after the request was built is above it: etcd's revisions
//     grow with every write, across resources;
//   - the observations of one watcher grow with its caches, and a watcher
//     that takes over lists after its predecessor stopped: its
//     observations are above its predecessor's. A leader that was paused
//     past its lease publishes nothing when it goes on (Options.Lease),
//     and what it published before its pause carries the stamp of its
//     caches then.
//
// Two requests of one parent with the same observation observed the same
// (but where only a related resource's object was deleted meanwhile: its
// informer is not asked).

// observation is the observation of a request about parent, built from
// the caches now, before the objects it observes are counted (observeAll).
func (w *Watcher) observation(ctl *core.Controller, parent *unstructured.Unstructured) int64 {
	gvrs := []schema.GroupVersionResource{ctl.Parent.GVR}
	for _, child := range ctl.Children {
		gvrs = append(gvrs, child.GVR)
	}
	if ctl.Rolling() {
		gvrs = append(gvrs, v1alpha1.RevisionResource)
	}
	obs := resourceVersion(parent)
	for _, gvr := range gvrs {
		obs = max(obs, parseVersion(w.reg.LastSyncResourceVersion(gvr)))
	}
	return obs
}

// observeAll raises meta's observation to the resourceVersions of the
// objects a request carries.
func observeAll(meta *bus.Meta, groups ...hooks.GroupedObjects) {
	for _, group := range groups {
		for _, objs := range group {
			for _, o := range objs {
				meta.Observation = max(meta.Observation, resourceVersion(o))
			}
		}
	}
}

func resourceVersion(obj *unstructured.Unstructured) int64 {
	return parseVersion(obj.GetResourceVersion())
}

// parseVersion reads a resourceVersion as the integer etcd gives (0 if it
// is not one: Kubernetes calls them opaque, and an apiserver on another
// store may give others; the observations of such a store's objects do
// not move, and the replies of one parent are then applied in the order
// they come).
func parseVersion(rv string) int64 {
	n, err := strconv.ParseInt(rv, 10, 64)
	if err != nil || n < 0 {
		return 0
	}
	return n
}
