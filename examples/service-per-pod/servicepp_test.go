package servicepp

import (
	"bytes"
	"reflect"
	"testing"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"universalcontroller.dev/uc/schemas/v1alpha1"
	"universalcontroller.dev/uc/sdk/go/hook"
)

func statefulSetObject(replicas int64, ports string) hook.Object {
	return hook.Object{
		"apiVersion": "apps/v1", "kind": "StatefulSet",
		"metadata": map[string]any{"name": "web", "annotations": map[string]any{AnnotationLabel: "pod-name", AnnotationPorts: ports}},
		"spec":     map[string]any{"replicas": replicas},
	}
}

func TestSyncServicePerPod(t *testing.T) {
	resp, err := SyncServicePerPod(t.Context(), &hook.DecoratorRequest{Object: statefulSetObject(2, "80:8080,9090:9090")})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Attachments) != 2 {
		t.Fatalf("%d attachments, want a Service per replica", len(resp.Attachments))
	}
	svc := resp.Attachments[1].(hook.Object)
	spec := svc["spec"].(map[string]any)
	sel, ports := spec["selector"], spec["ports"].([]any)
	if svc.GetName() != "web-1" || !reflect.DeepEqual(sel, map[string]any{"pod-name": "web-1"}) || len(ports) != 2 ||
		ports[0].(map[string]any)["targetPort"] != int64(8080) {
		t.Errorf("second Service %s selects %v with ports %v", svc.GetName(), sel, ports)
	}
	if _, err := SyncServicePerPod(t.Context(), &hook.DecoratorRequest{Object: statefulSetObject(1, "80")}); err == nil {
		t.Error("ports without a target port were accepted")
	}
}

func TestFinalizeServicePerPod(t *testing.T) {
	for _, tc := range []struct {
		services  hook.ObjectMap
		finalized bool
	}{
		{hook.ObjectMap{"web-0": {}}, false},
		{hook.ObjectMap{}, true},
	} {
		resp, err := FinalizeServicePerPod(t.Context(), &hook.DecoratorRequest{Object: statefulSetObject(1, "80:80"),
			Attachments: hook.GroupedObjects{"Service.v1": tc.services}, Finalizing: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Attachments) != 0 || resp.Finalized != tc.finalized {
			t.Errorf("with %d Services left: %d attachments, finalized %t", len(tc.services), len(resp.Attachments), resp.Finalized)
		}
	}
}

func TestSyncPodNameLabel(t *testing.T) {
	pod := hook.Object{"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": "web-0", "annotations": map[string]any{AnnotationPodLabel: "pod-name"}}}
	resp, err := SyncPodNameLabel(t.Context(), &hook.DecoratorRequest{Object: pod})
	if err != nil {
		t.Fatal(err)
	}
	if v := resp.Labels["pod-name"]; len(resp.Labels) != 1 || v == nil || *v != "web-0" {
		t.Errorf("labels %v, want pod-name=web-0", resp.Labels)
	}
}

func TestDecorators(t *testing.T) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(Decorators), 4096)
	names := map[string]v1alpha1.UniversalDecorator{}
	for {
		var ud v1alpha1.UniversalDecorator
		if err := dec.Decode(&ud); err != nil {
			break
		}
		names[ud.Name] = ud
	}
	spp, pnl := names[ServicePerPod], names[PodNameLabel]
	if len(spp.Spec.Resources) != 1 || spp.Spec.Resources[0].Resource != "statefulsets" || spp.Spec.Hooks.Finalize == nil ||
		len(spp.Spec.Attachments) != 1 || spp.Spec.Attachments[0].Resource != "services" {
		t.Errorf("decorators.yaml: %s is %+v", ServicePerPod, spp.Spec)
	}
	if len(pnl.Spec.Resources) != 1 || pnl.Spec.Resources[0].Resource != "pods" || len(pnl.Spec.Attachments) != 0 {
		t.Errorf("decorators.yaml: %s is %+v", PodNameLabel, pnl.Spec)
	}
}
