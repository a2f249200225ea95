package dispatcher

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"

	"universalcontroller.dev/uc/internal/webhook"
	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

type recordedCall struct {
	controller, hook, outcome string
	took                      time.Duration
}

type callRecorder struct{ calls []recordedCall }

func (r *callRecorder) HookCalled(controller, hook, outcome string, took time.Duration) {
	r.calls = append(r.calls, recordedCall{controller, hook, outcome, took})
}

// TestCallOutcomes calls webhooks that answer in every way a call can end
// and checks the outcome the observer hears of each.
func TestCallOutcomes(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // so that the client going away ends r's context
		switch r.URL.Path {
		case "/ok":
			_, _ = w.Write([]byte(`{"children":[]}`))
		case "/slow":
			<-r.Context().Done()
		case "/busy":
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
		case "/broken":
			http.Error(w, "boom", http.StatusInternalServerError)
		case "/accepted":
			w.WriteHeader(http.StatusAccepted)
		case "/html":
			_, _ = w.Write([]byte("<html>"))
		}
	}))
	defer srv.Close()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + closed.Addr().String()
	closed.Close()

	for _, tc := range []struct {
		url  string
		want string
	}{
		{srv.URL + "/ok", outcomeOK},
		{srv.URL + "/slow", outcomeTimeout},
		{srv.URL + "/busy", "http_4xx"},
		{srv.URL + "/broken", "http_5xx"},
		{srv.URL + "/accepted", "http_2xx"},
		{srv.URL + "/html", outcomeInvalidReply},
		{refused, outcomeUnreachable},
		{"://no-scheme", outcomeInvalidConfig},
	} {
		t.Run(tc.want, func(t *testing.T) {
			rec := &callRecorder{}
			url := tc.url
			h := observedHandler{webhook.New(hooks.Sync, &v1alpha1.Webhook{URL: &url}, nil, fake.NewClientset(), 1<<20), "foo.example.com", rec}
			ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
			defer cancel()
			_, _ = h.Handle(ctx, []byte(`{}`))
			if len(rec.calls) != 1 {
				t.Fatalf("observed %d calls, want 1", len(rec.calls))
			}
			got := rec.calls[0]
			if got.controller != "foo.example.com" || got.hook != hooks.Sync || got.outcome != tc.want || got.took <= 0 {
				t.Errorf("observed %+v, want outcome %s", got, tc.want)
			}
		})
	}
}
