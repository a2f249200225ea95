package applier

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"universalcontroller.dev/uc/core"
	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// A decorator's reply is applied like a controller's, with the decorated
// object as the parent, and these differences: the object must be one the
// decorator decorates (a reply for any other object is refused, with a
// Warning Event on the UniversalDecorator); its children are the
// attachments, which the decorator creates, updates and deletes but never
// adopts; and the reply's labels, annotations and status go to the object
// itself, with server-side apply under the decorator's field manager. uc
// adds no condition to a decorated object, whose status belongs to others:
// a rejected reply, or an apply that keeps failing, is a Warning Event on
// the object.

// decorate applies the reply of a decorator's hook to the decorated object.
func (rc *reconciler) decorate(ctx context.Context, parents *knownParents, ctl *core.Controller, b *batch, log *slog.Logger) error {
	m := b.meta
	key := m.ApplyKey()
	d, ok := ctl.Decorator.Decorated(m.Resource)
	if !ok {
		rc.refuseReply(log, ctl, b, fmt.Errorf("it names the resource %q, which the decorator does not decorate", m.Resource))
		return nil
	}
	view := ctl.Decorating(d)
	obj, err := rc.parent(ctx, view, m)
	if err != nil || obj == nil {
		if err == nil {
			log.Info("the decorated object is gone; reply dropped")
		}
		parents.forget(key)
		rc.decorated.forget(key)
		return err
	}
	if !ctl.Decorates(d, obj) {
		// This replica's cache may lag behind the watcher's: the apiserver
		// decides.
		obj, err = rc.dyn.Resource(d.GVR).Namespace(m.Namespace).Get(ctx, m.Name, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("read %s %s: %w", d.GVK.Kind, m.Key(), err)
		}
		if err != nil || obj.GetUID() != m.ParentUID {
			return nil // gone
		}
	}
	if !ctl.Decorates(d, obj) {
		rc.refuseReply(log, ctl, b, fmt.Errorf("the decorator does not decorate it: its selectors do not match it, and it lacks the finalizer %s", ctl.Finalizer()))
		return nil
	}
	if err := rc.applyDecoration(ctx, parents, view, d, obj, b, log); err != nil {
		rc.reportFailing(ctx, log, view, obj, m, err, false)
		return err
	}
	return nil
}

// applyDecoration makes the decorated object's attachments, labels,
// annotations, status and finalizer match the reply of the decorator (ctl,
// as it sees d's objects), and advances the fence.
func (rc *reconciler) applyDecoration(ctx context.Context, parents *knownParents, ctl *core.Controller, d *core.Decorated, obj *unstructured.Unstructured, b *batch, log *slog.Logger) error {
	m := b.meta
	key := m.ApplyKey()
	if f := b.failure(); f != nil {
		reason, problem := decodeFailure(f)
		return rc.rejectDecorated(log, ctl, m, obj, reason, problem)
	}
	r := b.latest()
	err := checkType(r)
	var resp *hooks.DecoratorResponse
	var actions []core.Write
	if err == nil {
		resp, actions, err = core.PlanDecoration(ctl, obj, r.meta.Hook, r.data, rc.maxChildren, rc.reg)
	}
	if err != nil {
		reason, problem := core.InvalidReply(m.Hook, err)
		return rc.rejectDecorated(log, ctl, m, obj, reason, problem)
	}
	actions, held := parents.holdRecreateLoops(key, actions, rc.reg)
	rc.reportRecreateLoops(ctl, obj, held, log) // uc adds no condition to a decorated object
	if _, err := rc.writer.execute(ctx, ctl, obj, actions); err != nil {
		if reason, problem := classify(m.Hook, err); problem != nil {
			return rc.rejectDecorated(log, ctl, m, obj, reason, problem)
		}
		return err
	}
	if err := rc.writeDecoration(ctx, ctl, d, obj, resp, key); err != nil {
		if reason, problem := classify(m.Hook, err); problem != nil {
			return rc.rejectDecorated(log, ctl, m, obj, reason, problem)
		}
		return err
	}
	// The finalizer stays while a finalize hook exists and has not said
	// finalized.
	keep := ctl.Spec.Hooks.Finalize != nil && (m.Hook == hooks.Sync || !resp.Finalized)
	if err := rc.setFinalizer(ctx, ctl, obj, keep); err != nil {
		return err
	}
	if resp.ResyncAfterSeconds > 0 {
		rc.resyncAfter(m, resp.ResyncAfterSeconds)
	}
	log.Debug("applied", "writes", len(actions))
	return rc.advanceFence(ctx, parents, m)
}

// refuseReply drops a decorator's reply that is not about an object the
// decorator decorates, and says so in a Warning Event on the
// UniversalDecorator. Nothing is written to the object it names.
func (rc *reconciler) refuseReply(log *slog.Logger, ctl *core.Controller, b *batch, problem error) {
	m := b.meta
	err := fmt.Errorf("%s reply for %s %s (uid %s) refused: %w", m.Hook, m.Resource, m.Key(), m.ParentUID, problem)
	log.Error("reply refused", "err", err)
	rc.observer.Rejected(m, "ReplyRefused")
	rc.events.Event(ctl.Object, "Warning", "ReplyRefused", err.Error())
}

// rejectDecorated reports a reply that cannot be applied to a decorated
// object in a Warning Event on the object, and touches nothing.
func (rc *reconciler) rejectDecorated(log *slog.Logger, ctl *core.Controller, m bus.Meta, obj *unstructured.Unstructured, reason string, problem error) error {
	logRejected(log, reason, problem)
	rc.observer.Rejected(m, reason)
	rc.warn(ctl, obj, reason, problem.Error())
	return nil
}

// writeDecoration sets the reply's labels, annotations and status on the
// decorated object with server-side apply, under the decorator's field
// manager: a label or annotation it set before and no longer sets is
// removed, those of others stay. A null status leaves the status alone.
// The configuration names the object's UID, so it never reaches another
// object of the same name, nor creates one that was deleted meanwhile. It
// writes nothing when the object already has what the decorator last wrote
// to it.
func (rc *reconciler) writeDecoration(ctx context.Context, ctl *core.Controller, d *core.Decorated, obj *unstructured.Unstructured, resp *hooks.DecoratorResponse, key types.UID) error {
	lbls, anns := core.Present(resp.Labels), core.Present(resp.Annotations)
	fp, err := core.Fingerprint(lbls, anns, resp.Status)
	if err != nil {
		return err
	}
	liveLabels, _, _ := unstructured.NestedMap(obj.Object, "metadata", "labels")
	liveAnns, _, _ := unstructured.NestedMap(obj.Object, "metadata", "annotations")
	liveStatus, _, _ := unstructured.NestedMap(obj.Object, "status")
	if rc.decorated.same(key, fp) && core.Contains(liveLabels, lbls) && core.Contains(liveAnns, anns) &&
		(resp.Status == nil || core.Contains(liveStatus, resp.Status)) {
		return nil
	}
	if err := mayWrite(ctx); err != nil {
		return err
	}
	res := rc.dyn.Resource(d.GVR).Namespace(obj.GetNamespace())
	opts := metav1.ApplyOptions{FieldManager: v1alpha1.FieldManager(ctl.Name), Force: true}
	cfg := parentConfig(ctx, d.GVR, obj)
	meta := cfg.Object["metadata"].(map[string]any)
	if len(lbls) > 0 {
		meta["labels"] = lbls
	}
	if len(anns) > 0 {
		meta["annotations"] = anns
	}
	if resp.Status != nil && !d.StatusSubresource {
		cfg.Object["status"] = resp.Status
	}
	out, err := res.Apply(ctx, obj.GetName(), cfg, opts)
	if err != nil {
		return judged(fmt.Errorf("write the labels and annotations of %s: %w", core.ObjectKey(obj), err))
	}
	noteWritten(ctx, d.GVR, out)
	if resp.Status != nil && d.StatusSubresource {
		cfg := parentConfig(ctx, d.GVR, obj)
		cfg.Object["status"] = resp.Status
		if out, err = res.ApplyStatus(ctx, obj.GetName(), cfg, opts); err != nil {
			return judged(fmt.Errorf("write the status of %s: %w", core.ObjectKey(obj), err))
		}
		noteWritten(ctx, d.GVR, out)
	}
	rc.decorated.remember(key, fp)
	return nil
}

// decorations remembers, per decorated object and decorator (by
// bus.Address.ApplyKey), the fingerprint of the labels, annotations and
// status last written, so an unchanged reply writes nothing. It is only a
// shortcut: a replica that does not remember writes once, and the
// apiserver finds nothing to change.
type decorations struct {
	mu      sync.Mutex
	applied map[types.UID]string
}

func (d *decorations) same(key types.UID, fp string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.applied[key] == fp
}

func (d *decorations) remember(key types.UID, fp string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.applied == nil {
		d.applied = map[types.UID]string{}
	}
	d.applied[key] = fp
}

func (d *decorations) forget(key types.UID) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.applied, key)
}
