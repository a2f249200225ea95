// Package foo is thesis use case 1, Kubernetes' sample-controller as a
// UniversalController hook: a Foo (spec.deploymentName, spec.replicas) owns
// one Deployment, and status.availableReplicas comes from that Deployment.
package foo

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"universalcontroller.dev/uc/sdk/go/hook"
)

// Controller is the name of the UniversalController in controller.yaml.
const Controller = "foo-controller"

// Foo is the parent.
type Foo struct {
	metav1.ObjectMeta `json:"metadata"`
	Spec              FooSpec `json:"spec"`
}

// FooSpec is the desired state of a Foo.
type FooSpec struct {
	DeploymentName string `json:"deploymentName"`
	Replicas       *int32 `json:"replicas"`
}

// Sync computes the Foo's Deployment and status.
func Sync(_ context.Context, req *hook.SyncRequest) (*hook.SyncResponse, error) {
	foo, err := hook.Decode[Foo](req.Parent)
	if err != nil {
		return nil, err
	}
	var available int32
	if d := req.Children["Deployment.apps/v1"][foo.Spec.DeploymentName]; d != nil {
		deployment, err := hook.Decode[appsv1.Deployment](d)
		if err != nil {
			return nil, err
		}
		available = deployment.Status.AvailableReplicas
	}
	return &hook.SyncResponse{
		Status:   map[string]any{"availableReplicas": available},
		Children: []any{newDeployment(foo.Name, foo.Spec)},
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
