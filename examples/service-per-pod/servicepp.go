// Package servicepp is Metacontroller's service-per-pod example as two
// UniversalDecorators (decorators.yaml): service-per-pod attaches a Service
// per Pod to every StatefulSet that asks for it by annotation, and
// pod-name-label labels those Pods with their names, which the Services
// select. The hooks are the example's jsonnet, in Go.
package servicepp

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"strings"

	"universalcontroller.dev/uc/sdk/go/hook"
)

// The UniversalDecorators' names in decorators.yaml.
const (
	ServicePerPod = "service-per-pod"
	PodNameLabel  = "pod-name-label"
)

// The annotations a StatefulSet asks for Services with: the label key the
// Services select their Pod by, and the ports, "port:targetPort,…".
const (
	AnnotationLabel = "service-per-pod-label"
	AnnotationPorts = "service-per-pod-ports"
	// AnnotationPodLabel on a Pod is the key of the label its name goes to.
	AnnotationPodLabel = "pod-name-label"
)

// Decorators is decorators.yaml, for programs that install the example.
//
//go:embed decorators.yaml
var Decorators []byte

// statefulSet is the decorated StatefulSet, as far as the hook reads it.
type statefulSet struct {
	Spec struct {
		Replicas int `json:"replicas"`
	} `json:"spec"`
}

// SyncServicePerPod attaches one Service per replica to a StatefulSet.
func SyncServicePerPod(_ context.Context, req *hook.DecoratorRequest) (*hook.DecoratorResponse, error) {
	sts, err := hook.Decode[statefulSet](req.Object)
	if err != nil {
		return nil, err
	}
	annotations := req.Object.GetAnnotations()
	ports, err := servicePorts(annotations[AnnotationPorts])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", AnnotationPorts, err)
	}
	resp := &hook.DecoratorResponse{Attachments: []any{}}
	for i := range sts.Spec.Replicas {
		pod := fmt.Sprintf("%s-%d", req.Object.GetName(), i)
		resp.Attachments = append(resp.Attachments, hook.Object{
			"apiVersion": "v1",
			"kind":       "Service",
			"metadata":   map[string]any{"name": pod, "labels": map[string]any{"app": ServicePerPod}},
			"spec": map[string]any{
				"selector": map[string]any{annotations[AnnotationLabel]: pod},
				"ports":    ports,
			},
		})
	}
	return resp, nil
}

// servicePorts parses "80:80,8080:8080" into a Service's ports.
func servicePorts(spec string) ([]any, error) {
	var ports []any
	for pair := range strings.SplitSeq(spec, ",") {
		port, target, ok := strings.Cut(pair, ":")
		p, err1 := strconv.ParseInt(port, 10, 32)
		t, err2 := strconv.ParseInt(target, 10, 32)
		if !ok || err1 != nil || err2 != nil {
			return nil, fmt.Errorf("%q is not port:targetPort", pair)
		}
		ports = append(ports, map[string]any{"name": "port-" + port, "port": p, "targetPort": t})
	}
	return ports, nil
}

// FinalizeServicePerPod deletes a StatefulSet's Services, and lets it go
// once none is left.
func FinalizeServicePerPod(_ context.Context, req *hook.DecoratorRequest) (*hook.DecoratorResponse, error) {
	return &hook.DecoratorResponse{
		Attachments: []any{},
		Finalized:   len(req.Attachments[hook.GroupKey("Service", "v1")]) == 0,
	}, nil
}

// SyncPodNameLabel labels a Pod with its name, under the key its
// annotation names.
func SyncPodNameLabel(_ context.Context, req *hook.DecoratorRequest) (*hook.DecoratorResponse, error) {
	pod := req.Object
	name := pod.GetName()
	return &hook.DecoratorResponse{Labels: map[string]*string{pod.GetAnnotations()[AnnotationPodLabel]: &name}}, nil
}
