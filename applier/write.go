package applier

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/csaupgrade"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"universalcontroller.dev/uc/core"
	"universalcontroller.dev/uc/internal/tracing"
	"universalcontroller.dev/uc/internal/verdict"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// writer makes the writes the reconciler planned for a reply's children:
// never half-applied (execute), in runs of the same verb and resource,
// each in a span of its own (tracedWrite), a dry run of the writes first
// when the apiserver could refuse one (preflight.go), the field ownership
// upgraded where a create left fields the apply cannot remove, and one
// Normal Event naming the children created, deleted, adopted or released.
// It keeps nothing between replies.
type writer struct {
	dyn       dynamic.Interface
	events    record.EventRecorder
	tracer    trace.Tracer
	log       *slog.Logger
	preflight Preflight // nil: every reply's writes are dry-run first
}

// execute makes the planned writes and tells whether any of them changed a
// child. A reply is never half-applied: the first write is written alone,
// then the others; when the apiserver could refuse one of the others
// (mayBeRefused), they are all tried as dry runs first. So the first child
// the apiserver refuses stops the reply before anything is written — the
// first write needs no dry run of its own, since nothing is written before
// it. Before adopting an orphan, an uncached read confirms the parent still
// exists, is the same object, and is not being deleted.
func (w *writer) execute(ctx context.Context, ctl *core.Controller, parent *unstructured.Unstructured, actions []core.Write) (bool, error) {
	if len(actions) == 0 {
		return false, nil
	}
	if slices.ContainsFunc(actions, func(act core.Write) bool { return act.Adopt }) {
		if err := w.confirmParent(ctx, ctl, parent); err != nil {
			return false, err
		}
	}
	first, rest := actions[:1], actions[1:]
	if why := w.mayBeRefused(ctx, rest); why != "" {
		w.log.Debug("dry run", "controller", ctl.Name, "parent", core.ObjectKey(parent), "uid", parent.GetUID(), "because", why)
		dryCtx, span := w.tracer.Start(ctx, "dry run")
		tracing.SetAttributes(span, func() []attribute.KeyValue { return []attribute.KeyValue{attribute.String("uc.because", why)} })
		_, _, err := w.writeAll(dryCtx, ctl, rest, true)
		tracing.End(span, err)
		if err != nil {
			return false, err
		}
	}
	done, changed, err := w.writeAll(ctx, ctl, first, false)
	if err == nil {
		var more []core.Write
		var moreChanged bool
		more, moreChanged, err = w.writeAll(ctx, ctl, rest, false)
		done, changed = append(done, more...), changed || moreChanged
	}
	// A failed write is reported by the caller: at once when the reply is
	// rejected, once it persists when it is retried.
	w.recordWrites(parent, done)
	return changed, err
}

// writeConcurrency bounds the writes of one reply in flight at once.
const writeConcurrency = 8

// writeAll makes the writes in order of runs: consecutive writes of the same
// verb and resource go at once, a run after the one before it (so a reply
// that lists claims before the Pods that mount them has them created
// first). It returns the writes made, whether any changed an object, and
// the first error.
func (w *writer) writeAll(ctx context.Context, ctl *core.Controller, actions []core.Write, dryRun bool) ([]core.Write, bool, error) {
	var done []core.Write
	changed := false
	for len(actions) > 0 {
		n := 1
		for n < len(actions) && actions[n].Verb == actions[0].Verb && actions[n].Child == actions[0].Child {
			n++
		}
		run := actions[:n]
		actions = actions[n:]
		results := make([]writeResult, len(run))
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(writeConcurrency)
		for i, act := range run {
			g.Go(func() error {
				var err error
				results[i], err = w.tracedWrite(gctx, ctl, act, dryRun)
				return err
			})
		}
		err := g.Wait()
		for i, act := range run {
			if results[i] != notWritten {
				done = append(done, act)
			}
			changed = changed || results[i] == changedObject
		}
		if err != nil {
			return done, changed, err
		}
	}
	return done, changed, nil
}

// writeResult is what one write did.
type writeResult int

const (
	notWritten    writeResult = iota // it failed
	unchanged                        // the apiserver had nothing to change, or a dry run
	changedObject                    // an object changed: its watch event follows
)

// recordWrites records one Normal Event on the parent for the writes of one
// reply that changed which children it has — created, deleted, recreated,
// adopted, released — as Kubernetes' own controllers record the Pods they
// create and delete, not those they update: its reason is theirs when they
// share one ("Created"), else "Applied"; its message names each child. An
// in-place update is routine (every spec change of the parent makes one per
// child) and shows on the parent's Synced condition; their Events took a
// sixth of the apiserver's CPU in the bench's update of 1000 parents.
func (w *writer) recordWrites(parent *unstructured.Unstructured, done []core.Write) {
	if reason, message, ok := core.WritesEvent(done); ok {
		w.events.Event(parent, "Normal", reason, message)
	}
}

// write makes one planned write. Each is conditioned on the object as the
// plan saw it (gate.go): an apply, a release and a delete name its
// resourceVersion, a create fails if the object exists; and it is made only
// while the apply's gate is open.
func (w *writer) write(ctx context.Context, ctl *core.Controller, act core.Write, dryRun bool) (writeResult, error) {
	var dry []string
	if dryRun {
		dry = []string{metav1.DryRunAll}
	} else if err := mayWrite(ctx); err != nil {
		return notWritten, fmt.Errorf("%s: %w", act, err)
	}
	res := w.dyn.Resource(act.Child.GVR).Namespace(act.Object.GetNamespace())
	result := changedObject
	var err error
	switch act.Verb {
	case core.VerbCreate:
		var out *unstructured.Unstructured
		out, err = res.Create(ctx, act.Object, metav1.CreateOptions{FieldManager: v1alpha1.FieldManager(ctl.Name), DryRun: dry})
		if apierrors.IsAlreadyExists(err) {
			err = w.inTheWay(ctx, res, ctl, act)
		}
		if err == nil && !dryRun {
			noteWritten(ctx, act.Child.GVR, out)
		}
	case core.VerbApply:
		// Applied to the object as it was planned on (an orphan adopted as
		// it was judged): a resourceVersion precondition.
		obj := withVersion(act.Object, act.Live.GetResourceVersion())
		var out *unstructured.Unstructured
		out, err = res.Apply(ctx, obj.GetName(), obj, metav1.ApplyOptions{FieldManager: v1alpha1.FieldManager(ctl.Name), Force: true, DryRun: dry})
		if err == nil && !dryRun {
			out, err = w.upgradeOwnership(ctx, res, ctl, out, act.Object)
		}
		if err == nil && out.GetResourceVersion() == act.Live.GetResourceVersion() {
			result = unchanged
		} else if err == nil && !dryRun {
			noteWritten(ctx, act.Child.GVR, out)
		}
	case core.VerbRelease:
		var out *unstructured.Unstructured
		out, err = testedPatch(ctx, res, act.Child.GVR.GroupResource(), act.Object.GetName(), releasePatch(act.Object, ctl),
			metav1.PatchOptions{FieldManager: v1alpha1.FieldManager(ctl.Name), DryRun: dry})
		switch {
		case apierrors.IsNotFound(err):
			result, err = unchanged, nil // gone
		case err == nil && !dryRun:
			noteWritten(ctx, act.Child.GVR, out)
		}
	case core.VerbDelete:
		uid, rv := act.Object.GetUID(), act.Object.GetResourceVersion()
		policy := metav1.DeletePropagationBackground
		err = res.Delete(ctx, act.Object.GetName(), metav1.DeleteOptions{Preconditions: preconditions(uid, rv), PropagationPolicy: &policy, DryRun: dry})
		if apierrors.IsNotFound(err) {
			result, err = unchanged, nil // already gone
		} else if err == nil && !dryRun {
			noteDeleted(ctx, act.Child.GVR, act.Object, uid)
		}
	}
	switch {
	case err != nil:
		return notWritten, judged(fmt.Errorf("%s: %w", act, err))
	case dryRun:
		return unchanged, nil
	}
	return result, nil
}

// errNotCachedYet is a create that met an object this replica's cache
// has not seen yet, mostly the child an apply of the same parent created
// a moment before (a parent's next reply planned on a cache behind the
// apiserver): the world moved on (movedOn), and the retry adopts it.
var errNotCachedYet = verdict.Wait.Mark(errors.New("it exists already, not yet seen by the cache: will adopt it"))

// inTheWay explains an object found where a create was to make a new child:
// the cache had not seen it. uc never takes it over by a create; if the
// parent may adopt it, the retry plans an adoption once the cache has it,
// otherwise the reply is refused. In a sharded installation a
// child of the parent labelled with another partition — by hand, or its
// parent moved by hand — is in no cache of this replica's, which holds
// only its partitions: it gets its parent's partition label here, with a
// patch conditioned on the object as read, and the retry finds it cached.
func (w *writer) inTheWay(ctx context.Context, res dynamic.ResourceInterface, ctl *core.Controller, act core.Write) error {
	cur, err := res.Get(ctx, act.Object.GetName(), metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("read the object in the way: %w", err)
	}
	owner := metav1.GetControllerOfNoCopy(act.Object).UID
	if err := core.MayManage(cur, owner, act.Selector); err != nil {
		return verdict.Permanent.Mark(&refusedError{err})
	}
	want, sharded := act.Object.GetLabels()[v1alpha1.LabelPartition]
	ref := metav1.GetControllerOfNoCopy(cur)
	if !sharded || ref == nil || ref.UID != owner || cur.GetLabels()[v1alpha1.LabelPartition] == want {
		return errNotCachedYet
	}
	if err := mayWrite(ctx); err != nil {
		return err
	}
	if err := relabel(ctx, res, ctl, cur, want); err != nil {
		return fmt.Errorf("it exists already, labelled with partition %q: label it with its parent's, %s: %w", cur.GetLabels()[v1alpha1.LabelPartition], want, err)
	}
	w.log.Warn("partition label set back", "controller", ctl.Name, "resource", act.Child.GVR.Resource, "object", types.NamespacedName{Namespace: cur.GetNamespace(), Name: cur.GetName()}.String(),
		"partition", want, "was", cur.GetLabels()[v1alpha1.LabelPartition])
	return verdict.Wait.Mark(fmt.Errorf("it exists already, labelled with partition %q: labelled with its parent's, %s; will adopt it once cached", cur.GetLabels()[v1alpha1.LabelPartition], want))
}

// upgradeOwnership moves the fields uc owns through a create — an Update
// operation of its field manager — to its server-side apply, and applies obj
// again, so a field dropped from the desired object is removed. out is the
// object as the apply left it. A controller served from Metacontroller's
// API also takes over the fields Metacontroller created and updated.
//
// It is needed only once a field so owned is no longer desired: the apply
// alone cannot remove it. Until then a child created by uc costs one apply
// per update, as one it applied from the start.
func (w *writer) upgradeOwnership(ctx context.Context, res dynamic.ResourceInterface, ctl *core.Controller, out, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	manager := v1alpha1.FieldManager(ctl.Name)
	former := sets.New(manager)
	if ctl.Metacontroller {
		former.Insert(core.MetacontrollerFieldManager)
	}
	if left, err := leftBehind(out, manager, former); err != nil || !left {
		return out, err
	}
	patch, err := csaupgrade.UpgradeManagedFieldsPatch(out, former, manager)
	if err != nil || patch == nil {
		return out, err
	}
	// Both writes are conditioned on the object as the one before left it.
	if patch, err = testVersion(patch, out.GetResourceVersion()); err != nil {
		return nil, err
	}
	upgraded, err := testedPatch(ctx, res, schema.GroupResource{Group: out.GroupVersionKind().Group, Resource: out.GetKind()}, out.GetName(), patch, metav1.PatchOptions{})
	if err != nil {
		return nil, fmt.Errorf("upgrade field ownership: %w", err)
	}
	out = upgraded
	obj = withVersion(obj, out.GetResourceVersion())
	return res.Apply(ctx, obj.GetName(), obj, metav1.ApplyOptions{FieldManager: manager, Force: true})
}

// withVersion is obj with the resourceVersion version, for a write
// conditioned on it: a copy of its top level and metadata that shares the
// rest (obj is the plan's, and written as it is).
func withVersion(obj *unstructured.Unstructured, version string) *unstructured.Unstructured {
	out := &unstructured.Unstructured{Object: maps.Clone(obj.Object)}
	meta, _ := out.Object["metadata"].(map[string]any)
	meta = maps.Clone(meta)
	if meta == nil {
		meta = map[string]any{}
	}
	meta["resourceVersion"] = version
	out.Object["metadata"] = meta
	return out
}

// leftBehind says whether out holds a field that the former managers set
// through an Update operation (a create, or an update of Metacontroller's)
// and manager's apply does not: a field the apply cannot remove.
func leftBehind(out *unstructured.Unstructured, manager string, former sets.Set[string]) (bool, error) {
	if appliedCovers(out, manager, former) {
		return false, nil
	}
	applied, updated := &fieldpath.Set{}, &fieldpath.Set{}
	for _, mf := range out.GetManagedFields() {
		var into **fieldpath.Set
		switch {
		case mf.FieldsV1 == nil || mf.Subresource != "":
			continue
		case mf.Manager == manager && mf.Operation == metav1.ManagedFieldsOperationApply:
			into = &applied
		case former.Has(mf.Manager) && mf.Operation == metav1.ManagedFieldsOperationUpdate:
			into = &updated
		default:
			continue
		}
		var set fieldpath.Set
		if err := set.FromJSON(bytes.NewReader(mf.FieldsV1.Raw)); err != nil {
			return false, fmt.Errorf("managed fields of %s: %w", mf.Manager, err)
		}
		*into = (*into).Union(&set)
	}
	// A map or list the apply sets something in is the apply's too: an
	// Update entry keeps owning the map itself ("f:data: {}") once the
	// apply has taken every field in it, and that removes nothing.
	for p := range applied.All() {
		for i := 1; i < len(p); i++ {
			applied.Insert(p[:i].Copy())
		}
	}
	return !updated.Difference(applied).Empty(), nil
}

// appliedCovers is leftBehind's answer when it is no, as most often,
// found without parsing the fields into sets: every field of the former
// managers' Update entries is in manager's apply, or holds one of its
// fields (a create's entry keeps the maps themselves, "f:data": {}).
// Read from the managedFields as the object holds them. False when
// unsure: a field path spelled two ways is told apart by parsing alone.
func appliedCovers(out *unstructured.Unstructured, manager string, former sets.Set[string]) bool {
	list, _, _ := unstructured.NestedFieldNoCopy(out.Object, "metadata", "managedFields")
	entries, _ := list.([]any)
	var applied map[string]any
	var updated []map[string]any
	for _, e := range entries {
		m, _ := e.(map[string]any)
		if sub, _ := m["subresource"].(string); sub != "" {
			continue
		}
		mgr, _ := m["manager"].(string)
		fields, _ := m["fieldsV1"].(map[string]any)
		switch op, _ := m["operation"].(string); {
		case mgr == manager && op == string(metav1.ManagedFieldsOperationApply):
			applied = fields
		case former.Has(mgr) && op == string(metav1.ManagedFieldsOperationUpdate):
			updated = append(updated, fields)
		}
	}
	return !slices.ContainsFunc(updated, func(u map[string]any) bool { return !covers(applied, u) })
}

// covers tells whether every field of the fieldsV1 tree u is in a, or is
// above one of a's fields.
func covers(a, u map[string]any) bool {
	for k, sub := range u {
		if k == "." { // the map itself, which a holds a field of
			continue
		}
		ak, ok := a[k].(map[string]any)
		if !ok {
			return false
		}
		if us, _ := sub.(map[string]any); !covers(ak, us) {
			return false
		}
	}
	return true
}

// refusedError is a write uc refuses to make (verdict.Permanent).
type refusedError struct{ error }

func (e *refusedError) Unwrap() error { return e.error }

// tracedWrite is write in a span of its own.
func (w *writer) tracedWrite(ctx context.Context, ctl *core.Controller, act core.Write, dryRun bool) (writeResult, error) {
	ctx, span := w.startWrite(ctx, act, dryRun)
	result, err := w.write(ctx, ctl, act, dryRun)
	tracing.SetAttributes(span, func() []attribute.KeyValue {
		return []attribute.KeyValue{attribute.Bool("uc.changed", result == changedObject)}
	})
	tracing.End(span, err)
	return result, err
}

// startWrite starts the span of a write.
func (w *writer) startWrite(ctx context.Context, act core.Write, dryRun bool) (context.Context, trace.Span) {
	ctx, span := w.tracer.Start(ctx, "write", trace.WithSpanKind(trace.SpanKindClient))
	tracing.SetAttributes(span, func() []attribute.KeyValue {
		return []attribute.KeyValue{attribute.String("uc.verb", string(act.Verb)), attribute.String("uc.resource", act.Child.GVR.Resource),
			attribute.String("uc.object", core.ObjectKey(act.Object)), attribute.Bool("uc.dry_run", dryRun)}
	})
	return ctx, span
}

// confirmParent reads the parent from the apiserver, not the cache, and
// fails unless it is the same object and is not being deleted.
func (w *writer) confirmParent(ctx context.Context, ctl *core.Controller, parent *unstructured.Unstructured) error {
	live, err := w.dyn.Resource(ctl.Parent.GVR).Namespace(parent.GetNamespace()).Get(ctx, parent.GetName(), metav1.GetOptions{})
	if err != nil {
		return judged(fmt.Errorf("confirm parent before adopting: %w", err))
	}
	if live.GetUID() != parent.GetUID() || live.GetDeletionTimestamp() != nil {
		return fmt.Errorf("parent %s was replaced or is being deleted: not adopting", parent.GetName())
	}
	return nil
}

// releasePatch removes the parent's ownerReference from a child, provided it
// is still there at the same place (a JSON patch test).
func releasePatch(child *unstructured.Unstructured, ctl *core.Controller) []byte {
	ref := metav1.GetControllerOfNoCopy(child)
	i := slices.IndexFunc(child.GetOwnerReferences(), func(r metav1.OwnerReference) bool { return r.UID == ref.UID })
	path := fmt.Sprintf("/metadata/ownerReferences/%d", i)
	b, _ := json.Marshal([]map[string]any{
		{"op": "test", "path": "/metadata/resourceVersion", "value": child.GetResourceVersion()},
		{"op": "test", "path": path + "/uid", "value": ref.UID},
		{"op": "remove", "path": path},
	})
	return b
}

// testedPatch makes a JSON patch whose test operations condition it on the
// object as it was read. The apiserver answers a failed test 422 Invalid;
// it is what it means, a conflict: another writer (a controller writing
// the object's status, say) changed the object since.
func testedPatch(ctx context.Context, res dynamic.ResourceInterface, gr schema.GroupResource, name string, patch []byte, opts metav1.PatchOptions) (*unstructured.Unstructured, error) {
	out, err := res.Patch(ctx, name, types.JSONPatchType, patch, opts)
	if apierrors.IsInvalid(err) {
		err = apierrors.NewConflict(gr, name, err)
	}
	return out, err
}

// testVersion puts in front of a JSON patch a test that the object's
// resourceVersion is still rv.
func testVersion(patch []byte, rv string) ([]byte, error) {
	var ops []map[string]any
	if err := json.Unmarshal(patch, &ops); err != nil {
		return nil, fmt.Errorf("read a JSON patch: %w", err)
	}
	ops = append([]map[string]any{{"op": "test", "path": "/metadata/resourceVersion", "value": rv}}, ops...)
	return json.Marshal(ops)
}

// classify tells a failed write that retrying the same reply cannot help
// (verdict.Permanent) — uc refusing the hook's objects (InvalidHookReply),
// or the apiserver (ApplyFailed) — from one worth retrying (problem nil).
func classify(hook string, err error) (reason string, problem error) {
	if verdict.Of(err) != verdict.Permanent {
		return "", nil
	}
	var refused *refusedError
	if errors.As(err, &refused) {
		return core.InvalidReply(hook, err)
	}
	return v1alpha1.ReasonApplyFailed, err
}

// judged marks an error of a write the apiserver refused with its verdict:
// Permanent when it refuses the hook's objects as they are (refusal), the
// verdict err carries otherwise.
func judged(err error) error {
	if refusal(err) {
		return verdict.Permanent.Mark(err)
	}
	return err
}

// refusal tells the apiserver refusing the hook's objects as they are: the
// same reply meets the same answer however often it is retried. The reply
// is rejected at once; the watcher publishes a parent whose reply was
// rejected again later (see watcher/republish.go), so a hook fixed since,
// or a rule of the cluster changed since, makes the parent converge. It is
// an object the apiserver finds invalid or malformed (422, 400 — a
// ValidatingAdmissionPolicy refuses with 422 unless it says otherwise), too
// large (413), or cannot type against its schema (untypable: server-side
// apply answers that with a 500 of its own), a write admission or
// authorization forbids (403: an admission webhook or policy, a quota,
// RBAC, a terminating namespace), one to a namespace or a resource the
// apiserver does not have (404), a verb the resource does not support
// (405). (uc refusing a write, refusedError, is marked where it is made.)
//
// Every other error is worth a retry of the same reply, with backoff: a
// conflict (409), a timeout (504, or a context deadline), too many
// requests (429), the apiserver or an admission webhook unavailable (500,
// 503), an expired credential (401), the network, the bus. One that
// persists is reported on the parent (reportFailing).
func refusal(err error) bool {
	return apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) || apierrors.IsRequestEntityTooLargeError(err) ||
		untypable(err) || apierrors.IsForbidden(err) || apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err)
}

// untypable tells the apiserver's server-side apply refusing an object it
// cannot type against its schema (a field of the wrong type, or one the
// schema does not declare).
//
// It is uc's one reading of an error's text, and the only place it may
// read one. The apiserver gives this refusal nothing typed to tell it by:
// its field manager returns a plain error ("failed to create typed patch
// object (…): …", k8s.io/apimachinery's
// pkg/util/managedfields/internal/structuredmerge.go), which the
// apiserver's responsewriters.ErrorToAPIStatus, as for any error that is
// not an API status, answers with a 500 of reason Unknown (empty), no
// details and the error's text as the message — the same answer as an
// unexpected failure of storage or of a conversion webhook, which is worth
// a retry. So it is told by the apiserver's message, read only in an
// API status with that code.
func untypable(err error) bool {
	var status apierrors.APIStatus
	return errors.As(err, &status) && status.Status().Code == http.StatusInternalServerError &&
		strings.Contains(status.Status().Message, "failed to create typed patch object")
}
