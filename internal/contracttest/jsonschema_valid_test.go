package contracttest

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"universalcontroller.dev/uc/examples/foo"
	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/sdk/go/hook"
)

// fromYAML reads a manifest and adds what the apiserver would: a UID, a
// resourceVersion, a generation and a creation time.
func fromYAML(t *testing.T, path, uid string) *unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(b, &u.Object); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	u.SetUID(types.UID(uid))
	u.SetResourceVersion("48213")
	u.SetGeneration(2)
	u.SetCreationTimestamp(metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))
	return u
}

func ptrTo[T any](v T) *T { return &v }

// fooController and fooParent are examples/foo's UniversalController and Foo
// as the watcher reads them from the cluster.
func fooController(t *testing.T) *unstructured.Unstructured {
	return fromYAML(t, "../../examples/foo/controller.yaml", "1d6e0c9a-3b8f-4f7e-8a52-9c0d1e2f3a4b")
}

func fooParent(t *testing.T) *unstructured.Unstructured {
	return fromYAML(t, "../../examples/foo/foo.yaml", "6f1c2a3e-0b5c-4d2e-9a1f-2b7c8d9e0f11")
}

// observedDeployment is the Foo's Deployment as an informer holds it: owned
// by the parent, with a status.
func observedDeployment(t *testing.T, parent *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	d := &appsv1.Deployment{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "example-foo", Namespace: "default", UID: "9a8b7c6d-0000-4000-8000-000000000001",
			ResourceVersion: "48220", Generation: 1,
			Labels: map[string]string{"app": "nginx", "controller": "example-foo"},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: parent.GetAPIVersion(), Kind: parent.GetKind(), Name: parent.GetName(),
				UID: parent.GetUID(), Controller: ptrTo(true), BlockOwnerDeletion: ptrTo(true),
			}},
		},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptrTo[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "nginx", "controller": "example-foo"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "nginx", "controller": "example-foo"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "nginx", Image: "nginx:latest"}}},
			},
		},
		Status: appsv1.DeploymentStatus{Replicas: 2, ReadyReplicas: 2, AvailableReplicas: 2, ObservedGeneration: 1},
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(d)
	if err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: obj}
}

// syncRequest builds a request the way watcher.sync does: an entry for every
// declared child kind, observed children keyed by hooks.ObjectKey, related
// empty.
func syncRequest(t *testing.T, version string, finalizing bool, children ...*unstructured.Unstructured) *hooks.SyncRequest {
	parent := fooParent(t)
	if finalizing {
		parent.SetDeletionTimestamp(ptrTo(metav1.NewTime(time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC))))
		parent.SetFinalizers([]string{"universalcontroller.dev/foo-controller"})
	}
	grouped := hooks.GroupedObjects{hooks.GroupKey("Deployment", "apps/v1"): hooks.ObjectMap{}}
	for _, c := range children {
		grouped.Insert(hooks.ObjectKey(version, true, c), c)
	}
	return &hooks.SyncRequest{
		Controller: fooController(t),
		Parent:     parent,
		Children:   grouped,
		Related:    hooks.GroupedObjects{},
		Finalizing: finalizing,
	}
}

// eventData encodes v as the watcher and the worker do, with event.SetData.
func eventData(t *testing.T, v any) []byte {
	t.Helper()
	e := event.New()
	if err := e.SetData(event.ApplicationJSON, v); err != nil {
		t.Fatal(err)
	}
	return e.Data()
}

func TestGoValuesAreValid(t *testing.T) {
	parent := fooParent(t)
	deployment := observedDeployment(t, parent)
	// The Foo example's reply, through the Go SDK as a worker serves it.
	served, err := hook.Sync(foo.Sync).Handle(context.Background(), eventData(t, syncRequest(t, "v1", false, deployment)))
	if err != nil {
		t.Fatal(err)
	}
	reply := served.(*hook.SyncResponse)
	related := syncRequest(t, "v2", false, deployment)
	cm := &unstructured.Unstructured{}
	cm.SetAPIVersion("v1")
	cm.SetKind("ConfigMap")
	cm.SetNamespace("default")
	cm.SetName("settings")
	cm.Object["data"] = map[string]any{"replicas": "2"}
	related.Related.Insert(hooks.ObjectKey("v2", true, cm), cm)

	selector := &metav1.LabelSelector{
		MatchLabels:      map[string]string{"app": "nginx"},
		MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"web"}}},
	}

	for _, tc := range []struct {
		name string
		typ  string
		v    any
	}{
		{"sync request, no child yet", bus.RequestType(hooks.Sync), syncRequest(t, "v1", false)},
		{"sync request, v1 keys", bus.RequestType(hooks.Sync), syncRequest(t, "v1", false, deployment)},
		{"sync request, v2 keys and related", bus.RequestType(hooks.Sync), related},
		{"finalize request", bus.RequestType(hooks.Finalize), syncRequest(t, "v1", true, deployment)},
		{"foo sync response", bus.ResponseType(hooks.Sync), reply},
		{"sync response, resync", bus.ResponseType(hooks.Sync), &hook.SyncResponse{
			Status: map[string]any{"phase": "Waiting"}, Children: reply.Children, ResyncAfterSeconds: 2.5}},
		{"sync response, no children (null)", bus.ResponseType(hooks.Sync), &hooks.SyncResponse{}},
		{"sync response, events and conditions", bus.ResponseType(hooks.Sync), &hook.SyncResponse{
			Children: reply.Children,
			Events:   []hook.Event{{Type: "Warning", Reason: "LowDisk", Message: "95% full"}, {Type: "Normal", Reason: "Scaled"}},
			Conditions: []hook.Condition{{Type: "Ready", Status: "True", Reason: "AllUp", Message: "3/3"},
				{Type: "example.com/Degraded", Status: "Unknown", Reason: "Probing"}}}},
		{"finalize response", bus.ResponseType(hooks.Finalize), &hooks.SyncResponse{Finalized: true}},
		{"finalize response, children", bus.ResponseType(hooks.Finalize), &hook.SyncResponse{
			Status: map[string]any{"availableReplicas": 0}, Children: reply.Children, Finalized: false}},
		{"customize request", bus.RequestType(hooks.Customize), &hooks.CustomizeRequest{
			Controller: fooController(t), Parent: parent}},
		{"customize response", bus.ResponseType(hooks.Customize), &hooks.CustomizeResponse{
			RelatedResources: []hooks.RelatedResourceRule{
				{APIVersion: "v1", Resource: "configmaps", LabelSelector: selector},
				{APIVersion: "v1", Resource: "configmaps", LabelSelector: selector, NamespaceSelector: selector},
				{APIVersion: "v1", Resource: "secrets", Namespace: "default", Names: []string{"a", "b"}},
			}}},
		{"customize response, nothing (null)", bus.ResponseType(hooks.Customize), &hooks.CustomizeResponse{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := eventData(t, tc.v)
			if err := Validate(tc.typ, data); err != nil {
				t.Errorf("%v\ndata: %s", err, data)
			}
		})
	}
}
