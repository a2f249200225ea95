package applier

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/nats-io/nats.go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"universalcontroller.dev/uc/core"
	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// setFinalizer puts the controller's finalizer on the parent, or takes it
// off. A finalizer cannot be added to a parent being deleted. It is put on
// with server-side apply with a field manager of its own, so other
// finalizers are left alone. It is taken off with a JSON patch that removes
// it where it still is: whoever put it there (uc, or Metacontroller before
// uc served its CompositeController), a finalizer another field manager
// also owns would stay if uc merely stopped applying it.
func (rc *reconciler) setFinalizer(ctx context.Context, ctl *core.Controller, parent *unstructured.Unstructured, want bool) error {
	change := core.FinalizerChange(ctl, parent, want)
	if change == "" {
		return nil
	}
	if err := mayWrite(ctx); err != nil {
		return err
	}
	res := rc.dyn.Resource(ctl.Parent.GVR).Namespace(parent.GetNamespace())
	var out *unstructured.Unstructured
	var err error
	if change == "add" {
		obj := parentConfig(ctx, ctl.Parent.GVR, parent)
		obj.Object["metadata"].(map[string]any)["finalizers"] = []any{ctl.Finalizer()}
		out, err = res.Apply(ctx, parent.GetName(), obj, metav1.ApplyOptions{FieldManager: v1alpha1.FieldManager(ctl.Name) + "/finalizer", Force: true})
	} else {
		path := fmt.Sprintf("/metadata/finalizers/%d", slices.Index(parent.GetFinalizers(), ctl.Finalizer()))
		patch, _ := json.Marshal([]map[string]any{
			{"op": "test", "path": "/metadata/uid", "value": parent.GetUID()},
			{"op": "test", "path": "/metadata/resourceVersion", "value": basisVersion(ctx, ctl.Parent.GVR, parent)},
			{"op": "test", "path": path, "value": ctl.Finalizer()},
			{"op": "remove", "path": path},
		})
		out, err = testedPatch(ctx, res, ctl.Parent.GVR.GroupResource(), parent.GetName(), patch, metav1.PatchOptions{FieldManager: v1alpha1.FieldManager(ctl.Name) + "/finalizer"})
	}
	if err != nil {
		return fmt.Errorf("set finalizer: %w", err)
	}
	noteWritten(ctx, ctl.Parent.GVR, out)
	return nil
}

// resyncAfter asks the watcher to sync the parent again after a delay. It is
// a core NATS message: if it is lost, a restarted watcher syncs every parent
// anyway.
func (rc *reconciler) resyncAfter(m bus.Meta, seconds float64) {
	b, _ := json.Marshal(bus.Resync{Resource: m.Resource, Namespace: m.Namespace, Name: m.Name, AfterSeconds: seconds})
	if err := rc.js.Conn().PublishMsg(&nats.Msg{Subject: m.ResyncSubject(), Data: b}); err != nil {
		rc.log.Warn("ask for a resync", append(m.LogArgs(), "err", err)...)
	}
}

// announce tells the watcher that an apply to the parent starts, or ended
// having made those writes.
func (rc *reconciler) announce(m bus.Meta, done bool, wrote []bus.Written) {
	b, _ := json.Marshal(bus.Applying{Resource: m.Resource, Namespace: m.Namespace, Name: m.Name, Done: done, Wrote: wrote})
	if err := rc.js.Conn().PublishMsg(&nats.Msg{Subject: m.ApplyingSubject(), Data: b}); err != nil {
		rc.log.Warn("announce an apply", append(m.LogArgs(), "err", err)...)
	}
}

// parentConfig is the start of a server-side apply configuration of the
// parent: its identity, with the UID, so that an apply to a parent replaced
// by another of the same name fails, and the resourceVersion the apply of
// ctx planned on (basisVersion), so that an apply to a parent changed since
// meets a conflict.
func parentConfig(ctx context.Context, gvr schema.GroupVersionResource, parent *unstructured.Unstructured) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": parent.GetAPIVersion(),
		"kind":       parent.GetKind(),
		"metadata": map[string]any{
			"name":            parent.GetName(),
			"namespace":       parent.GetNamespace(),
			"uid":             string(parent.GetUID()),
			"resourceVersion": basisVersion(ctx, gvr, parent),
		},
	}}
}
