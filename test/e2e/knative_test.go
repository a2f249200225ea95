package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	duckv1 "knative.dev/pkg/apis/duck/v1"

	"universalcontroller.dev/uc/dispatcher/dispatchertest"
	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

var knativeServiceGVR = schema.GroupVersionResource{Group: "serving.knative.dev", Version: "v1", Resource: "services"}

// echoFunction is the Echo hook as a function of the shape Knative's func
// generates for Go, naming itself server. An Echo in mode "silent" gets no
// reply event.
func echoFunction(server string) dispatchertest.Function {
	return func(_ context.Context, e event.Event) (*event.Event, error) {
		var req hooks.SyncRequest
		if err := json.Unmarshal(e.Data(), &req); err != nil {
			return nil, err
		}
		if mode, _, _ := unstructured.NestedString(req.Parent.Object, "spec", "mode"); mode == "silent" {
			return nil, nil
		}
		reply := event.New()
		reply.SetID(e.ID() + "-reply")
		reply.SetSource("/functions/" + server)
		reply.SetType(bus.ResponseType(hooks.Sync))
		if err := reply.SetData(event.ApplicationJSON, echoSync(req.Parent, server)); err != nil {
			return nil, err
		}
		return &reply, nil
	}
}

// serveFunction serves fn over HTTP until the test ends.
func serveFunction(t *testing.T, fn dispatchertest.Function) *httptest.Server {
	srv := httptest.NewServer(dispatchertest.FunctionHandler(t, fn))
	t.Cleanup(srv.Close)
	return srv
}

// setAddress sets a Knative Service's status.address.url.
func setAddress(t *testing.T, ns, name, url string) {
	t.Helper()
	patch := fmt.Sprintf(`{"status":{"address":{"url":%q}}}`, url)
	if _, err := env.dyn.Resource(knativeServiceGVR).Namespace(ns).Patch(t.Context(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
}

// TestKnativeDestination: a hook whose destination is a Knative Service is
// called, as a CloudEvent, at the Service's status.address.url; when that
// URL changes, the next calls follow it without a restart; a function that
// answers no event fails the parent's sync saying so.
func TestKnativeDestination(t *testing.T) {
	ctx := t.Context()
	if err := applyFile(ctx, filepath.Join(env.root, "test/e2e/testdata/hooks-knative-service-crd.yaml")); err != nil {
		t.Fatal(err)
	}
	ns := namespace(t)
	fn1, fn2 := serveFunction(t, echoFunction("fn-1")), serveFunction(t, echoFunction("fn-2"))
	svc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "serving.knative.dev/v1", "kind": "Service",
		"metadata": map[string]any{"name": "echo", "namespace": ns},
		"spec":     map[string]any{},
	}}
	eventually(t, 30*time.Second, func() error { // the CRD may not be served yet
		_, err := env.dyn.Resource(knativeServiceGVR).Namespace(ns).Create(ctx, svc, metav1.CreateOptions{})
		return err
	})
	setAddress(t, ns, "echo", fn1.URL)
	const controller = "knative-echo"
	registerEchoController(t, controller, v1alpha1.Hook{
		Destination: &duckv1.Destination{Ref: &duckv1.KReference{APIVersion: "serving.knative.dev/v1", Kind: "Service", Namespace: ns, Name: "echo"}},
		Delivery:    fastDelivery(5 * time.Second),
	})

	createEcho(t, ns, "greeting", controller, "hello", "")
	eventually(t, time.Minute, func() error { return echoSynced(ctx, ns, "greeting", "fn-1", "hello") })

	// The Service moves: calls follow its new URL. The old one is gone, so
	// a call that still went there would fail and be retried.
	setAddress(t, ns, "echo", fn2.URL)
	fn1.Close()
	setEcho(t, ns, "greeting", "moved", "")
	eventually(t, time.Minute, func() error { return echoSynced(ctx, ns, "greeting", "fn-2", "moved") })

	createEcho(t, ns, "quiet", controller, "anyone?", "silent")
	eventually(t, time.Minute, func() error { return hookFailed(ctx, ns, "quiet", "empty reply: a hook must answer with a CloudEvent") })
}
