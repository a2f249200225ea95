package registry

import (
	"context"
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/record"

	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// statusWriter reports on UniversalControllers and UniversalDecorators:
// condition Ready, and a Warning Event when a controller cannot run.
type statusWriter struct {
	dyn    dynamic.Interface
	events record.EventRecorder
}

// report sets the controller's Ready condition from problem (nil: running),
// and records a Warning Event for a problem. It writes, and records, only
// when the condition changes: a controller retried every few seconds for
// the same reason (say, a permission uc lacks) says it once.
func (s *statusWriter) report(ctx context.Context, uc *unstructured.Unstructured, problem error) error {
	if s == nil {
		return nil
	}
	cond := metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Running",
		Message: "the controller is running", ObservedGeneration: uc.GetGeneration()}
	if problem != nil {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, "CannotRun", problem.Error()
	}
	_, status := statusOf(uc)
	conditions := slices.Clone(status.Conditions)
	cond.LastTransitionTime = metav1.NewTime(time.Now())
	old := meta.FindStatusCondition(conditions, cond.Type)
	same := old != nil && old.Status == cond.Status && old.Reason == cond.Reason && old.Message == cond.Message
	if problem != nil && !same {
		s.events.Event(uc, "Warning", "CannotRun", problem.Error())
	}
	if changed := meta.SetStatusCondition(&conditions, cond); !changed && status.ObservedGeneration == uc.GetGeneration() {
		return nil
	}
	// Only the fields this report owns: the failing parents have a field
	// manager of their own.
	status = v1alpha1.UniversalControllerStatus{ObservedGeneration: uc.GetGeneration(), Conditions: conditions}
	out, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&status)
	if err != nil {
		return err
	}
	return s.apply(ctx, uc, "uc/registry", out)
}

// reportFailures sets the controller's count of failing parents and its
// latest failure, when they changed. An installation without a process
// that reports (WithStatus) has them in Events on the parents alone.
func (s *statusWriter) reportFailures(ctx context.Context, uc *unstructured.Unstructured, failing int, last *v1alpha1.ParentFailure) error {
	if s == nil {
		return nil
	}
	raw, status := statusOf(uc)
	if _, set := raw["parentsFailing"]; set && int(status.ParentsFailing) == failing && equality.Semantic.DeepEqual(status.LastFailure, last) {
		return nil
	}
	// parentsFailing is written when 0 too: "none failing" is not "not
	// reported".
	out := map[string]any{"parentsFailing": int64(failing)}
	if last != nil {
		l, err := runtime.DefaultUnstructuredConverter.ToUnstructured(last)
		if err != nil {
			return err
		}
		out["lastFailure"] = l
	}
	return s.apply(ctx, uc, "uc/registry/parents", out)
}

// statusOf returns a UniversalController's status, raw and decoded.
func statusOf(uc *unstructured.Unstructured) (map[string]any, v1alpha1.UniversalControllerStatus) {
	var status v1alpha1.UniversalControllerStatus
	raw, _, _ := unstructured.NestedMap(uc.Object, "status")
	_ = runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &status)
	return raw, status
}

// apply writes the fields of status the field manager owns, with
// server-side apply. Metacontroller's CRDs declare a status without fields:
// its objects have the Events alone.
func (s *statusWriter) apply(ctx context.Context, uc *unstructured.Unstructured, manager string, status map[string]any) error {
	if uc.GroupVersionKind().Group != v1alpha1.Group {
		return nil
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.Group + "/" + v1alpha1.Version,
		"kind":       uc.GetKind(),
		"metadata":   map[string]any{"name": uc.GetName(), "uid": string(uc.GetUID())},
		"status":     status,
	}}
	gvr := v1alpha1.Resource
	if uc.GetKind() == "UniversalDecorator" {
		gvr = v1alpha1.DecoratorResource
	}
	_, err := s.dyn.Resource(gvr).ApplyStatus(ctx, uc.GetName(), obj, metav1.ApplyOptions{FieldManager: manager, Force: true})
	if err != nil {
		return fmt.Errorf("write status of %s: %w", uc.GetName(), err)
	}
	return nil
}
