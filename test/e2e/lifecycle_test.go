package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// controllerReady checks a UniversalController's Ready condition: status
// and a message holding want.
func controllerReady(ctx context.Context, name, status, want string) error {
	return readyIs(ctx, v1alpha1.Resource, name, status, want)
}

// readyIs checks the Ready condition of a UniversalController or a
// UniversalDecorator (gvr): status and a message holding want.
func readyIs(ctx context.Context, gvr schema.GroupVersionResource, name, status, want string) error {
	obj, err := env.dyn.Resource(gvr).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	c := condition(obj, "Ready")
	if c == nil || c["status"] != status || !strings.Contains(fmt.Sprint(c["message"]), want) {
		return fmt.Errorf("Ready condition of %s is %v, want %s naming %q", name, c, status, want)
	}
	return nil
}

// crdGVR is the CustomResourceDefinitions resource.
var crdGVR = apiextensionsv1.SchemeGroupVersion.WithResource("customresourcedefinitions")

// crd is a CustomResourceDefinition of kind in group, served as v1, with a
// status subresource if status.
func crd(group, plural, kind string, status bool) *unstructured.Unstructured {
	v := apiextensionsv1.CustomResourceDefinitionVersion{Name: "v1", Served: true, Storage: true,
		Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
			Type: "object", XPreserveUnknownFields: func() *bool { b := true; return &b }()}}}
	if status {
		v.Subresources = &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}}
	}
	obj, _ := runtime.DefaultUnstructuredConverter.ToUnstructured(&apiextensionsv1.CustomResourceDefinition{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"},
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: group, Scope: apiextensionsv1.NamespaceScoped,
			Names:    apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Kind: kind},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{v}},
	})
	return &unstructured.Unstructured{Object: obj}
}

// TestControllerLifecycle: a controller whose parent CRD does not exist yet
// says so in its status and starts within seconds of the CRD's creation,
// without a restart of uc; a parent without a status subresource gets a
// Warning Event on the controller and a condition saying so.
func TestControllerLifecycle(t *testing.T) {
	ctx := t.Context()
	register := func(name, group, plural string) {
		t.Helper()
		uc := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "universalcontroller.dev/v1alpha1", "kind": "UniversalController",
			"metadata": map[string]any{"name": name},
			"spec": map[string]any{
				"parentResource":   map[string]any{"apiVersion": group + "/v1", "resource": plural},
				"generateSelector": true,
				"childResources":   []any{map[string]any{"apiVersion": "v1", "resource": "configmaps"}},
				"hooks":            map[string]any{"sync": map[string]any{}},
			},
		}}
		createClusterScoped(t, v1alpha1.Resource, uc)
	}

	register("late-controller", "late.e2e.universalcontroller.dev", "lates")
	eventually(t, time.Minute, func() error {
		return controllerReady(ctx, "late-controller", "False", "lates")
	})
	createClusterScoped(t, crdGVR, crd("late.e2e.universalcontroller.dev", "lates", "Late", true))
	created := time.Now()
	eventually(t, time.Minute, func() error { return controllerReady(ctx, "late-controller", "True", "running") })
	t.Logf("the controller started %s after its parent CRD was created", time.Since(created).Round(100*time.Millisecond))

	createClusterScoped(t, crdGVR, crd("nostatus.e2e.universalcontroller.dev", "nostatuses", "NoStatus", false))
	register("nostatus-controller", "nostatus.e2e.universalcontroller.dev", "nostatuses")
	eventually(t, time.Minute, func() error {
		if err := controllerReady(ctx, "nostatus-controller", "False", "no status subresource"); err != nil {
			return err
		}
		events, err := env.kube.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=nostatus-controller,type=Warning"})
		if err != nil {
			return err
		}
		for _, e := range events.Items {
			if strings.Contains(e.Message, "no status subresource") {
				return nil
			}
		}
		return fmt.Errorf("no Warning Event on nostatus-controller among %d", len(events.Items))
	})
}
