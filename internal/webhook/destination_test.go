package webhook

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/cloudevents/sdk-go/v2/event"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"knative.dev/pkg/apis"
	duckv1 "knative.dev/pkg/apis/duck/v1"
	"knative.dev/pkg/client/injection/ducks/duck/v1/addressable"
	"knative.dev/pkg/injection/clients/dynamicclient"
	"knative.dev/pkg/resolver"
	"knative.dev/pkg/tracker"

	"universalcontroller.dev/uc/dispatcher/dispatchertest"
	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/sdk/go/hook"
)

var knativeServices = schema.GroupVersionResource{Group: "serving.knative.dev", Version: "v1", Resource: "services"}

// newResolver is a resolver over a fake cluster holding objs.
func newResolver(t *testing.T, objs ...runtime.Object) *resolver.URIResolver {
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{knativeServices: "ServiceList"}, objs...)
	ctx := addressable.WithDuck(context.WithValue(t.Context(), dynamicclient.Key{}, dyn))
	return resolver.NewURIResolverFromTracker(ctx, tracker.New(func(types.NamespacedName) {}, time.Minute))
}

// TestDestination: a destination gets the request as a binary-mode
// CloudEvent with Prefer: reply, and only a 200 with a JSON response event
// of the hook's type is a reply.
func TestDestination(t *testing.T) {
	var prefer, binary string
	fn := func(_ context.Context, e event.Event) (*event.Event, error) {
		reply := event.New()
		reply.SetID("r-" + e.ID())
		reply.SetSource("/fn")
		reply.SetType(bus.ResponseType(hooks.Sync))
		data := any(map[string]any{"children": []any{}, "sawController": e.Extensions()[bus.ExtController]})
		switch e.Subject() {
		case "ns/accepted":
			return nil, cehttp.NewResult(http.StatusAccepted, "queued")
		case "ns/empty":
			return nil, nil
		case "ns/wrong-type":
			reply.SetType("com.example.other")
		case "ns/text":
			data = []byte("hello")
			if err := reply.SetData("text/plain", data); err != nil {
				return nil, err
			}
			return &reply, nil
		}
		if err := reply.SetData(cloudevents.ApplicationJSON, data); err != nil {
			return nil, err
		}
		return &reply, nil
	}
	receive := dispatchertest.FunctionHandler(t, fn)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		prefer, binary = r.Header.Get("Prefer"), r.Header.Get("Ce-Id")
		receive.ServeHTTP(w, r)
	}))
	defer srv.Close()
	svc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "serving.knative.dev/v1", "kind": "Service",
		"metadata": map[string]any{"name": "fn", "namespace": "hooks"},
		"status":   map[string]any{"address": map[string]any{"url": srv.URL}},
	}}
	controller := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "c"}}}
	uri, _ := apis.ParseURL(srv.URL)
	res := newResolver(t, svc)
	for _, tc := range []struct {
		name, parent string
		dest         duckv1.Destination
		reason       string // "" for a reply
		want         string
	}{
		{"uri", "ok", duckv1.Destination{URI: uri}, "", `"sawController":"c"`},
		{"ref", "ok", duckv1.Destination{Ref: &duckv1.KReference{APIVersion: "serving.knative.dev/v1", Kind: "Service", Namespace: "hooks", Name: "fn"}}, "", `"children":[]`},
		{"missing ref", "ok", duckv1.Destination{Ref: &duckv1.KReference{APIVersion: "serving.knative.dev/v1", Kind: "Service", Namespace: "hooks", Name: "gone"}}, ReasonUnresolved, `"gone" not found`},
		{"202", "accepted", duckv1.Destination{URI: uri}, hook.ReasonHTTPError, "202 Accepted without a reply"},
		{"empty 200", "empty", duckv1.Destination{URI: uri}, hook.ReasonInvalidReply, "empty reply"},
		{"wrong type", "wrong-type", duckv1.Destination{URI: uri}, hook.ReasonInvalidReply, `reply of type "com.example.other", want "dev.universalcontroller.sync.response"`},
		{"not JSON", "text", duckv1.Destination{URI: uri}, hook.ReasonInvalidReply, `reply is not JSON (content type "text/plain"): "hello"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &destinationHandler{hook: hooks.Sync, dest: tc.dest, controller: controller, resolver: res, client: srv.Client(), limit: 1 << 20}
			req := event.New()
			req.SetID("q-1")
			req.SetSource("/universalcontroller/c")
			req.SetType(bus.RequestType(hooks.Sync))
			req.SetSubject("ns/" + tc.parent)
			req.SetExtension(bus.ExtController, "c")
			if err := req.SetData(cloudevents.ApplicationJSON, map[string]any{"parent": map[string]any{}}); err != nil {
				t.Fatal(err)
			}
			reply, err := h.Handle(hook.ContextWithRequest(t.Context(), &req, slog.Default()), req.Data())
			if tc.reason == "" {
				if b, _ := reply.([]byte); err != nil || !strings.Contains(string(b), tc.want) {
					t.Fatalf("got %s, %v; want a reply with %s", b, err, tc.want)
				}
				if prefer != "reply" || binary != "q-1" {
					t.Errorf("request headers: Prefer %q, Ce-Id %q; want a binary-mode event with Prefer: reply", prefer, binary)
				}
				return
			}
			var e *hook.Error
			if !errors.As(err, &e) || e.Reason != tc.reason || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %s naming %q", err, tc.reason, tc.want)
			}
		})
	}
}
