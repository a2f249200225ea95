package applier

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"

	"universalcontroller.dev/uc/core"
	"universalcontroller.dev/uc/core/coretest"
	"universalcontroller.dev/uc/internal/objtest"
	"universalcontroller.dev/uc/internal/tracing"
	"universalcontroller.dev/uc/internal/verdict"
	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// TestCreateNeverUpserts: a create that finds an object the cache has not
// seen never writes it; it is refused when the parent could not adopt it,
// and retried (to adopt it once the cache has it) when it could.
func TestCreateNeverUpserts(t *testing.T) {
	ctl := coretest.Controller(v1alpha1.ChildUpdateInPlace)
	parent := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Parent"}}
	parent.SetNamespace("ns")
	parent.SetName("p")
	parent.SetUID("parent-uid")
	sel := labels.SelectorFromSet(labels.Set{v1alpha1.LabelControllerUID: "parent-uid"})
	unlabelled := objtest.Object("ConfigMap", "ns", "taken", map[string]any{"secret": "x"}, "")
	for _, tc := range []struct {
		name     string
		existing *unstructured.Unstructured
		refused  string // "" when the create is retried
	}{
		{"an orphan the selector does not match", unlabelled, "is controlled by no one"},
		{"another parent's child", objtest.Object("ConfigMap", "ns", "taken", nil, "other-uid"), "already controlled by Parent p"},
		{"an orphan the selector matches", objtest.Claimable(objtest.Object("ConfigMap", "ns", "taken", nil, "")), ""},
	} {
		for _, dryRun := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s, dry run %v", tc.name, dryRun), func(t *testing.T) {
				dyn := dynamicfake.NewSimpleDynamicClient(runtime.NewScheme(), tc.existing.DeepCopy())
				w := &writer{dyn: dyn, tracer: tracing.Tracer(nil)}
				want, err := coretest.Desired(ctl, parent, objtest.Object("ConfigMap", "", "taken", map[string]any{"k": "v"}, ""))
				if err != nil {
					t.Fatal(err)
				}
				act := core.Write{Verb: core.VerbCreate, Child: &ctl.Children[0], Object: want, Selector: sel}
				_, err = w.write(t.Context(), ctl, act, dryRun)
				var refused *refusedError
				switch {
				case err == nil:
					t.Fatal("the create of an existing object succeeded")
				case tc.refused != "" && (!errors.As(err, &refused) || !strings.Contains(err.Error(), tc.refused) || verdict.Of(err) != verdict.Permanent):
					t.Fatalf("err = %v, want a refusal naming %q, permanent", err, tc.refused)
				case tc.refused == "" && (errors.As(err, &refused) || verdict.Of(err) == verdict.Permanent):
					t.Fatalf("err = %v, want one that is retried", err)
				}
				live, err := dyn.Resource(ctl.Children[0].GVR).Namespace("ns").Get(t.Context(), "taken", metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(live.Object, tc.existing.Object) {
					t.Fatalf("the existing object changed: %v", live.Object)
				}
			})
		}
	}
}

// TestPermanent: a write the apiserver refuses for what the hook's object
// is, or for what the cluster forbids, rejects the reply at once; a write
// that failed for a passing reason is retried.
func TestPermanent(t *testing.T) {
	cms := schema.GroupResource{Resource: "configmaps"}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{verdict.Permanent.Mark(&refusedError{errors.New("controlled by another parent")}), true},
		{apierrors.NewInvalid(schema.GroupKind{Kind: "ConfigMap"}, "c", field.ErrorList{field.Invalid(field.NewPath("data"), "x", "bad key")}), true},
		{apierrors.NewBadRequest("cannot decode"), true},
		{apierrors.NewRequestEntityTooLargeError("limit is 3145728"), true},
		{&apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: 500, Reason: metav1.StatusReasonUnknown,
			Message: "failed to create typed patch object (ns/c; /v1, Kind=ConfigMap): .data: expected map, got string"}}, true},
		{apierrors.NewForbidden(cms, "c", errors.New(`admission webhook "policy.example.com" denied the request`)), true},
		{apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "gone"), true},
		{apierrors.NewMethodNotSupported(cms, "create"), true},
		{apierrors.NewConflict(cms, "c", errors.New("the object has been modified")), false},
		{apierrors.NewServerTimeout(cms, "create", 1), false},
		{apierrors.NewTimeoutError("request timed out", 1), false},
		{apierrors.NewTooManyRequests("slow down", 1), false},
		{apierrors.NewInternalError(errors.New(`failed calling webhook "policy.example.com": connection refused`)), false},
		{&apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: 500, Reason: metav1.StatusReasonUnknown,
			Message: "conversion webhook for example.com/v1, Kind=Parent failed: connection refused"}}, false},
		{errors.New("failed to create typed patch object, said a proxy"), false}, // text alone, no API status: not the apiserver's refusal
		{apierrors.NewServiceUnavailable("try later"), false},
		{apierrors.NewUnauthorized("token expired"), false},
		{context.DeadlineExceeded, false},
		{errors.New("nats: timeout"), false},
	} {
		t.Run(tc.err.Error(), func(t *testing.T) {
			err := judged(fmt.Errorf("create configmaps ns/c: %w", tc.err)) // as write wraps it
			if got := verdict.Of(err) == verdict.Permanent; got != tc.want {
				t.Errorf("verdict %v, want permanent: %v", verdict.Of(err), tc.want)
			}
			if reason, problem := classify(hooks.Sync, err); (problem != nil) != tc.want || tc.want && reason == "" {
				t.Errorf("classify = %q, %v; want a rejection: %v", reason, problem, tc.want)
			}
		})
	}
}

// TestLeftBehind: ownership is upgraded only when a field set through a
// create (or Metacontroller's updates) is not in uc's apply, which alone
// could not remove it.
func TestLeftBehind(t *testing.T) {
	const manager = "uc/c"
	entry := func(manager string, op metav1.ManagedFieldsOperationType, fields, subresource string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: op, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(fields)}, Subresource: subresource}
	}
	const (
		keepDrop = `{"f:data":{".":{},"f:drop":{},"f:keep":{}},"f:metadata":{"f:labels":{".":{},"f:app":{}}}}`
		keep     = `{"f:data":{".":{},"f:keep":{}},"f:metadata":{"f:labels":{".":{},"f:app":{}}}}`
	)
	// What a create and a force apply of the same fields, one value
	// changed, leave (read from kube-apiserver 1.34): the Update entry
	// keeps the maps themselves.
	const (
		createdThenApplied = `{"f:data":{},"f:metadata":{"f:annotations":{},"f:labels":{".":{},"f:app":{}},"f:ownerReferences":{".":{},"k:{\"uid\":\"u\"}":{}}}}`
		applied            = `{"f:data":{"f:payload":{}},"f:metadata":{"f:annotations":{"f:universalcontroller.dev/applied-hash":{}},"f:labels":{"f:app":{}},"f:ownerReferences":{"k:{\"uid\":\"u\"}":{}}}}`
		appliedNoLabels    = `{"f:data":{"f:payload":{}},"f:metadata":{"f:annotations":{"f:universalcontroller.dev/applied-hash":{}},"f:ownerReferences":{"k:{\"uid\":\"u\"}":{}}}}`
	)
	for _, tc := range []struct {
		name    string
		entries []metav1.ManagedFieldsEntry
		former  []string
		want    bool
		covered bool // told without parsing (appliedCovers)
	}{
		{"created, then applied with a value changed", []metav1.ManagedFieldsEntry{
			entry(manager, metav1.ManagedFieldsOperationApply, applied, ""),
			entry(manager, metav1.ManagedFieldsOperationUpdate, createdThenApplied, ""),
		}, nil, false, true},
		{"created, then applied without its labels", []metav1.ManagedFieldsEntry{
			entry(manager, metav1.ManagedFieldsOperationApply, appliedNoLabels, ""),
			entry(manager, metav1.ManagedFieldsOperationUpdate, createdThenApplied, ""),
		}, nil, true, false},
		{"applied from the start", []metav1.ManagedFieldsEntry{entry(manager, metav1.ManagedFieldsOperationApply, keep, "")}, nil, false, true},
		{"created, every field still applied", []metav1.ManagedFieldsEntry{
			entry(manager, metav1.ManagedFieldsOperationUpdate, keepDrop, ""),
			entry(manager, metav1.ManagedFieldsOperationApply, keepDrop, ""),
		}, nil, false, true},
		{"created, a field no longer applied", []metav1.ManagedFieldsEntry{
			entry(manager, metav1.ManagedFieldsOperationUpdate, keepDrop, ""),
			entry(manager, metav1.ManagedFieldsOperationApply, keep, ""),
		}, nil, true, false},
		{"another manager's update is not uc's to remove", []metav1.ManagedFieldsEntry{
			entry("kubectl-edit", metav1.ManagedFieldsOperationUpdate, keepDrop, ""),
			entry(manager, metav1.ManagedFieldsOperationApply, keep, ""),
		}, nil, false, true},
		{"Metacontroller's update, taken over", []metav1.ManagedFieldsEntry{
			entry(core.MetacontrollerFieldManager, metav1.ManagedFieldsOperationUpdate, keepDrop, ""),
			entry(manager, metav1.ManagedFieldsOperationApply, keep, ""),
		}, []string{core.MetacontrollerFieldManager}, true, false},
		{"a status update is not the object's", []metav1.ManagedFieldsEntry{
			entry(manager, metav1.ManagedFieldsOperationUpdate, `{"f:status":{"f:x":{}}}`, "status"),
			entry(manager, metav1.ManagedFieldsOperationApply, keep, ""),
		}, nil, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := &unstructured.Unstructured{Object: map[string]any{}}
			out.SetManagedFields(tc.entries)
			former := sets.New(append(tc.former, manager)...)
			got, err := leftBehind(out, manager, former)
			if err != nil || got != tc.want {
				t.Errorf("leftBehind = %v, %v; want %v", got, err, tc.want)
			}
			if covered := appliedCovers(out, manager, former); covered != tc.covered {
				t.Errorf("appliedCovers = %v, want %v", covered, tc.covered)
			}
		})
	}
}

// TestWritesAreNoted: the writes an apply makes are noted for the notice of
// its end (bus.Applying.Wrote) — an object written with the apiserver's
// answer, a delete with the deleted UID — and a dry run notes nothing.
func TestWritesAreNoted(t *testing.T) {
	ctl := coretest.Controller(v1alpha1.ChildUpdateInPlace)
	child := &ctl.Children[0]
	old := objtest.Object("ConfigMap", "ns", "old", nil, "")
	old.SetUID("old-uid")
	created := objtest.Object("ConfigMap", "ns", "new", map[string]any{"k": "v"}, "")
	actions := []core.Write{{Verb: core.VerbCreate, Child: child, Object: created}, {Verb: core.VerbDelete, Child: child, Object: old}}
	for _, dryRun := range []bool{true, false} {
		t.Run(fmt.Sprintf("dry run %v", dryRun), func(t *testing.T) {
			dyn := dynamicfake.NewSimpleDynamicClient(runtime.NewScheme(), old.DeepCopy())
			w := &writer{dyn: dyn, tracer: tracing.Tracer(nil)}
			ctx, wrote := withWrote(t.Context())
			for _, act := range actions {
				if _, err := w.write(ctx, ctl, act, dryRun); err != nil {
					t.Fatal(err)
				}
			}
			var want []bus.Written
			if !dryRun {
				want = []bus.Written{
					{Version: "v1", Resource: "configmaps", Namespace: "ns", Name: "new"},
					{Version: "v1", Resource: "configmaps", Namespace: "ns", Name: "old", Deleted: "old-uid"},
				}
			}
			if got := wrote.all(); !reflect.DeepEqual(got, want) {
				t.Fatalf("noted %+v, want %+v", got, want)
			}
		})
	}
}

// TestChangedSinceIsAConflict: a JSON patch whose test of the object's
// resourceVersion fails — another writer changed the child since uc read
// it — is answered 422 Invalid by the apiserver; uc takes it for what it
// is, a conflict, which is retried, never a refusal that rejects the reply.
func TestChangedSinceIsAConflict(t *testing.T) {
	ctl := coretest.Controller(v1alpha1.ChildUpdateInPlace)
	child := objtest.Object("ConfigMap", "ns", "c1", map[string]any{"keep": "1"}, "parent-uid")
	child.SetResourceVersion("7")
	child.SetManagedFields([]metav1.ManagedFieldsEntry{
		{Manager: v1alpha1.FieldManager(ctl.Name), Operation: metav1.ManagedFieldsOperationUpdate, FieldsType: "FieldsV1",
			FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:data":{".":{},"f:drop":{},"f:keep":{}}}`)}},
		{Manager: v1alpha1.FieldManager(ctl.Name), Operation: metav1.ManagedFieldsOperationApply, FieldsType: "FieldsV1",
			FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:data":{".":{},"f:keep":{}}}`)}},
	})
	testFailed := func(dyn *dynamicfake.FakeDynamicClient) {
		dyn.PrependReactor("patch", "*", func(clienttesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewInvalid(schema.GroupKind{Kind: "ConfigMap"}, "c1",
				field.ErrorList{field.Invalid(field.NewPath("metadata", "resourceVersion"), "8", "testing value 7 failed")})
		})
	}
	for _, tc := range []struct {
		name  string
		write func(w *writer, dyn *dynamicfake.FakeDynamicClient) error
	}{
		{"release", func(w *writer, _ *dynamicfake.FakeDynamicClient) error {
			_, err := w.write(t.Context(), ctl, core.Write{Verb: core.VerbRelease, Child: &ctl.Children[0], Object: child}, false)
			return err
		}},
		{"the field ownership upgrade after an apply", func(w *writer, dyn *dynamicfake.FakeDynamicClient) error {
			_, err := w.upgradeOwnership(t.Context(), dyn.Resource(ctl.Children[0].GVR).Namespace("ns"), ctl, child, child)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dyn := dynamicfake.NewSimpleDynamicClient(runtime.NewScheme(), child.DeepCopy())
			testFailed(dyn)
			err := tc.write(&writer{dyn: dyn, tracer: tracing.Tracer(nil)}, dyn)
			permanent := verdict.Of(judged(err)) == verdict.Permanent
			if !apierrors.IsConflict(err) || permanent {
				t.Errorf("err = %v: want a conflict, retried (permanent: %t)", err, permanent)
			}
		})
	}
}

// TestWithVersion: the object written with a resourceVersion holds it,
// and the plan's object is left as it was, its nested fields shared.
func TestWithVersion(t *testing.T) {
	for _, tc := range []struct {
		name string
		obj  map[string]any
	}{
		{"with metadata", map[string]any{"kind": "ConfigMap", "metadata": map[string]any{"name": "a", "resourceVersion": "1"}, "data": map[string]any{"k": "v"}}},
		{"without metadata", map[string]any{"kind": "ConfigMap"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := &unstructured.Unstructured{Object: tc.obj}
			before := obj.DeepCopy()
			out := withVersion(obj, "42")
			if got := out.GetResourceVersion(); got != "42" {
				t.Errorf("resourceVersion %q, want 42", got)
			}
			if !reflect.DeepEqual(obj.Object, before.Object) {
				t.Errorf("the plan's object changed: %v, was %v", obj.Object, before.Object)
			}
			// But for the version, what is written is the plan's object.
			out.SetResourceVersion("")
			before.SetResourceVersion("")
			if before.Object["metadata"] == nil {
				before.Object["metadata"] = map[string]any{}
			}
			if !reflect.DeepEqual(out.Object, before.Object) {
				t.Errorf("written %v, want %v", out.Object, before.Object)
			}
		})
	}
}
