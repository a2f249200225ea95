package dispatcher

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"universalcontroller.dev/uc/internal/webhook"
	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// TestWebhookCallIsTraced: a webhook call is a client span under the hook
// call's span, and the webhook gets its trace context in a traceparent
// header, with or without credentials.
func TestWebhookCallIsTraced(t *testing.T) {
	token := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "token", Namespace: "hooks"}, Data: map[string][]byte{"token": []byte("s3cret")}}
	for _, tc := range []struct {
		name string
		conn v1alpha1.Connection
	}{
		{"plain", v1alpha1.Connection{}},
		{"with a bearer token", v1alpha1.Connection{Authorization: &v1alpha1.Authorization{SecretRef: v1alpha1.KeyReference{Name: "token", Namespace: "hooks"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got trace.SpanContext
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				got = trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), propagation.HeaderCarrier(r.Header)))
				_, _ = w.Write([]byte(`{}`))
			}))
			defer srv.Close()
			rec := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
			ctx, call := tp.Tracer("worker").Start(t.Context(), "hook sync")
			h := webhook.New(hooks.Sync, &v1alpha1.Webhook{URL: &srv.URL, Connection: tc.conn}, nil, fake.NewClientset(token), 1<<20)
			if _, err := h.Handle(ctx, []byte(`{}`)); err != nil {
				t.Fatal(err)
			}
			call.End()
			var client sdktrace.ReadOnlySpan
			for _, s := range rec.Ended() {
				if s.SpanKind() == trace.SpanKindClient {
					client = s
				}
			}
			switch {
			case client == nil:
				t.Fatalf("no client span among %d", len(rec.Ended()))
			case client.Parent().SpanID() != call.SpanContext().SpanID():
				t.Errorf("client span's parent %s, want the call %s", client.Parent().SpanID(), call.SpanContext().SpanID())
			case !got.Equal(client.SpanContext().WithRemote(true)):
				t.Errorf("the webhook got trace context %+v, want the client span's %+v", got, client.SpanContext())
			}
		})
	}
}
