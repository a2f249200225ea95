package registry

import (
	"context"
	"fmt"
	"slices"
	"time"

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
	var status v1alpha1.UniversalControllerStatus
	raw, _, _ := unstructured.NestedMap(uc.Object, "status")
	_ = runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &status)
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
	status.ObservedGeneration, status.Conditions = uc.GetGeneration(), conditions
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&v1alpha1.UniversalController{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.Group + "/" + v1alpha1.Version, Kind: uc.GetKind()},
		ObjectMeta: metav1.ObjectMeta{Name: uc.GetName(), UID: uc.GetUID()},
		Status:     status,
	})
	if err != nil {
		return err
	}
	delete(obj, "spec")
	gvr := v1alpha1.Resource
	if uc.GetKind() == "UniversalDecorator" {
		gvr = v1alpha1.DecoratorResource
	}
	_, err = s.dyn.Resource(gvr).ApplyStatus(ctx, uc.GetName(), &unstructured.Unstructured{Object: obj},
		metav1.ApplyOptions{FieldManager: "uc/registry", Force: true})
	if err != nil {
		return fmt.Errorf("write status of %s: %w", uc.GetName(), err)
	}
	return nil
}
