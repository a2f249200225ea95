// Package foo is thesis use case 1, Kubernetes' sample-controller as a
// UniversalController hook: a Foo (spec.deploymentName, spec.replicas) owns
// one Deployment, and status.availableReplicas comes from that Deployment.
package foo

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"universalcontroller.dev/uc/schemas/hooks"
)

// Controller is the name of the UniversalController in controller.yaml.
const Controller = "foo-controller"

// FooSpec is the desired state of a Foo.
type FooSpec struct {
	DeploymentName string `json:"deploymentName"`
	Replicas       *int32 `json:"replicas"`
}

// Sync computes the Foo's Deployment and status.
func Sync(_ context.Context, req *hooks.SyncRequest) (*hooks.SyncResponse, error) {
	var spec FooSpec
	raw, _, _ := unstructured.NestedMap(req.Parent.Object, "spec")
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &spec); err != nil {
		return nil, err
	}
	var available int64
	if d := req.Children["Deployment.apps/v1"][spec.DeploymentName]; d != nil {
		available, _, _ = unstructured.NestedInt64(d.Object, "status", "availableReplicas")
	}
	deployment, err := runtime.DefaultUnstructuredConverter.ToUnstructured(newDeployment(req.Parent.GetName(), spec))
	if err != nil {
		return nil, err
	}
	return &hooks.SyncResponse{
		Status:   map[string]any{"availableReplicas": available},
		Children: []*unstructured.Unstructured{{Object: deployment}},
	}, nil
}

func newDeployment(foo string, spec FooSpec) *appsv1.Deployment {
	labels := map[string]string{"app": "nginx", "controller": foo}
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: spec.DeploymentName},
		Spec: appsv1.DeploymentSpec{
			Replicas: spec.Replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "nginx", Image: "nginx:latest"}}},
			},
		},
	}
}
