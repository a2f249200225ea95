package dispatcher

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes/fake"

	"universalcontroller.dev/uc/dispatcher/worker"
	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

func TestWebhookURL(t *testing.T) {
	str := func(s string) *string { return &s }
	port := func(p int32) *int32 { return &p }
	svc := &v1alpha1.ServiceReference{Name: "hook", Namespace: "ctl"}
	for _, tc := range []struct {
		name    string
		webhook v1alpha1.Webhook
		want    string
	}{
		{"url", v1alpha1.Webhook{URL: str("http://h:8080/sync")}, "http://h:8080/sync"},
		{"url wins over service", v1alpha1.Webhook{URL: str("http://h/sync"), Service: svc, Path: str("/x")}, "http://h/sync"},
		{"service defaults", v1alpha1.Webhook{Service: svc, Path: str("/sync")}, "http://hook.ctl.svc:80/sync"},
		{"service https", v1alpha1.Webhook{Service: &v1alpha1.ServiceReference{Name: "hook", Namespace: "ctl", Port: port(8443), Protocol: str("https")}}, "https://hook.ctl.svc:8443"},
		{"neither", v1alpha1.Webhook{Path: str("/sync")}, "webhook has neither url nor service"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := webhookURL(&tc.webhook)
			if err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestWebhookHandler: the request is POSTed as plain JSON and the 200
// body is the reply, as with Metacontroller; a webhook without a URL fails
// every call saying so.
func TestWebhookHandler(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" || string(body) != `{"parent":{}}` {
			http.Error(w, "unexpected "+r.Method+" "+string(body), http.StatusBadRequest)
			return
		}
		_, _ = w.Write([]byte(`{"children":[]}`))
	}))
	defer srv.Close()
	h := &webhookHandler{hook: hooks.Sync, spec: &v1alpha1.Webhook{URL: &srv.URL}, kube: fake.NewClientset(), limit: 1 << 20}
	reply, err := h.Handle(t.Context(), []byte(`{"parent":{}}`))
	if b, _ := reply.([]byte); err != nil || string(b) != `{"children":[]}` {
		t.Fatalf("got %s, %v", b, err)
	}
	h = &webhookHandler{hook: hooks.Sync, spec: &v1alpha1.Webhook{}, kube: fake.NewClientset()}
	_, err = h.Handle(t.Context(), nil)
	var e *worker.Error
	if !errors.As(err, &e) || e.Reason != ReasonInvalidHookConfig || !strings.Contains(err.Error(), "neither url nor service") {
		t.Fatalf("got %v, want InvalidHookConfig", err)
	}
}
