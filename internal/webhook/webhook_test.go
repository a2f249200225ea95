package webhook

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes/fake"

	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/schemas/v1alpha1"
	"universalcontroller.dev/uc/sdk/go/hook"
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
		{"service defaults", v1alpha1.Webhook{Service: svc, Path: str("/sync")}, "http://hook.ctl:80/sync"},
		{"service https", v1alpha1.Webhook{Service: &v1alpha1.ServiceReference{Name: "hook", Namespace: "ctl", Port: port(8443), Protocol: str("https")}}, "https://hook.ctl:8443"},
		{"bad url", v1alpha1.Webhook{URL: str("http://h:port/")}, `webhook url: parse "http://h:port/": invalid port ":port" after host`},
		{"neither", v1alpha1.Webhook{Path: str("/sync")}, "webhook has neither url nor service"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, err := webhookURL(&tc.webhook)
			var got string
			if err != nil {
				got = err.Error()
			} else {
				got = u.String()
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
	h := newWebhookHandler(hooks.Sync, &v1alpha1.Webhook{URL: &srv.URL}, nil, fake.NewClientset(), 1<<20)
	reply, err := h.Handle(t.Context(), []byte(`{"parent":{}}`))
	if b, _ := reply.([]byte); err != nil || string(b) != `{"children":[]}` {
		t.Fatalf("got %s, %v", b, err)
	}
	h = newWebhookHandler(hooks.Sync, &v1alpha1.Webhook{}, nil, fake.NewClientset(), 1<<20)
	_, err = h.Handle(t.Context(), nil)
	var e *hook.Error
	if !errors.As(err, &e) || e.Reason != ReasonInvalidHookConfig || !strings.Contains(err.Error(), "neither url nor service") {
		t.Fatalf("got %v, want InvalidHookConfig", err)
	}
}

// TestWebhookEndpointConfig: a webhook without credentials of its own is
// called with those of the endpoint config of its host, basic auth from a
// Secret's custom keys here.
func TestWebhookEndpointConfig(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Header.Get("Authorization"))
		_, _ = w.Write([]byte(`{}`))
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	kube := fake.NewClientset(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds", Namespace: "hooks"},
		Data: map[string][]byte{"login": []byte("uc"), "secret": []byte("pw")}})
	endpoints := []v1alpha1.EndpointConfig{
		{Host: "elsewhere:80", Connection: v1alpha1.Connection{Authorization: &v1alpha1.Authorization{SecretRef: v1alpha1.KeyReference{Name: "nope", Namespace: "hooks"}}}},
		{Host: u.Host, Connection: v1alpha1.Connection{BasicAuth: &v1alpha1.BasicAuth{
			SecretRef: v1alpha1.SecretReference{Name: "creds", Namespace: "hooks"}, UsernameKey: "login", PasswordKey: "secret"}}},
	}
	h := newWebhookHandler(hooks.Sync, &v1alpha1.Webhook{URL: &srv.URL}, endpoints, kube, 1<<20)
	if _, err := h.Handle(t.Context(), []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if want := "Basic dWM6cHc="; len(got) != 1 || got[0] != want {
		t.Fatalf("the webhook saw Authorization %q, want %q", got, want)
	}
}

// etagHook answers each parent's spec.message, with the reply's hash as its
// ETag; a request whose If-None-Match is that ETag gets notModified (304
// or 412) instead, and is counted.
type etagHook struct {
	notModified int

	mu          sync.Mutex
	calls       int
	conditional []string // the If-None-Match of each call
	unmodified  int
}

func (h *etagHook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req hooks.SyncRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	message, _, _ := unstructured.NestedString(req.Parent.Object, "spec", "message")
	reply := fmt.Sprintf(`{"status":{"message":%q}}`, message)
	etag := fmt.Sprintf(`"%x"`, sha256.Sum256([]byte(reply)))
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls++
	h.conditional = append(h.conditional, r.Header.Get("If-None-Match"))
	if r.Header.Get("If-None-Match") == etag {
		h.unmodified++
		w.WriteHeader(h.notModified)
		return
	}
	w.Header().Set("ETag", etag)
	_, _ = w.Write([]byte(reply))
}

// TestWebhookEtag: with webhook.etag enabled, a parent's call carries the
// ETag of its last reply in If-None-Match, and a 304 or 412 answer is that
// reply again; a changed reply replaces it, another parent has its own;
// disabled, no call is conditional.
func TestWebhookEtag(t *testing.T) {
	request := func(name, message string) []byte {
		return []byte(fmt.Sprintf(`{"parent":{"kind":"Echo","metadata":{"namespace":"ns","name":%q},"spec":{"message":%q}}}`, name, message))
	}
	calls := []struct{ parent, message string }{{"a", "hi"}, {"a", "hi"}, {"a", "hi"}, {"a", "bye"}, {"b", "bye"}, {"a", "bye"}}
	enabled := true
	for _, tc := range []struct {
		name        string
		etag        *v1alpha1.WebhookEtag
		notModified int
		unmodified  int
	}{
		{"304", &v1alpha1.WebhookEtag{Enabled: &enabled}, http.StatusNotModified, 3},
		{"412", &v1alpha1.WebhookEtag{Enabled: &enabled}, http.StatusPreconditionFailed, 3},
		{"not enabled", &v1alpha1.WebhookEtag{}, http.StatusNotModified, 0},
		{"no etag", nil, http.StatusNotModified, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hook := &etagHook{notModified: tc.notModified}
			srv := httptest.NewServer(hook)
			defer srv.Close()
			h := newWebhookHandler(hooks.Sync, &v1alpha1.Webhook{URL: &srv.URL, Etag: tc.etag}, nil, fake.NewClientset(), 1<<20)
			for i, c := range calls {
				reply, err := h.Handle(t.Context(), request(c.parent, c.message))
				if want := fmt.Sprintf(`{"status":{"message":%q}}`, c.message); err != nil || string(reply.([]byte)) != want {
					t.Fatalf("call %d: got %s, %v; want %s", i, reply, err, want)
				}
			}
			if hook.calls != len(calls) || hook.unmodified != tc.unmodified {
				t.Errorf("%d calls, %d not modified; want %d and %d", hook.calls, hook.unmodified, len(calls), tc.unmodified)
			}
			// The first calls of a and b are unconditional, and so are all
			// calls without the cache.
			if tc.unmodified > 0 && (hook.conditional[0] != "" || hook.conditional[4] != "" || hook.conditional[3] == "") {
				t.Errorf("If-None-Match of the calls: %q", hook.conditional)
			}
			if tc.unmodified == 0 && slices.ContainsFunc(hook.conditional, func(s string) bool { return s != "" }) {
				t.Errorf("If-None-Match sent without the cache: %q", hook.conditional)
			}
		})
	}
}

// TestEtagCache: a reply expires after cacheTimeoutSeconds (never without
// it), and the expired ones are dropped from memory at most every
// cacheCleanupSeconds.
func TestEtagCache(t *testing.T) {
	enabled := true
	seconds := func(s int32) *int32 { return &s }
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	a, b := etagKey{kind: "Echo", name: "a"}, etagKey{kind: "Echo", name: "b"}

	forever := newEtagCache(&v1alpha1.WebhookEtag{Enabled: &enabled})
	forever.now = clock
	forever.put(a, `"1"`, []byte("{}"))
	now = now.Add(1000 * time.Hour)
	if _, ok := forever.get(a); !ok {
		t.Error("without cacheTimeoutSeconds, a reply expired")
	}

	c := newEtagCache(&v1alpha1.WebhookEtag{Enabled: &enabled, CacheTimeoutSeconds: seconds(10), CacheCleanupSeconds: seconds(60)})
	c.now = clock
	c.put(a, `"1"`, []byte("{}")) // sweeps: the first put
	now = now.Add(9 * time.Second)
	if e, ok := c.get(a); !ok || e.etag != `"1"` {
		t.Errorf("after 9s: %+v, %v; want the reply", e, ok)
	}
	now = now.Add(time.Second)
	if _, ok := c.get(a); ok {
		t.Error("after 10s: the reply is still used")
	}
	c.put(b, `"2"`, []byte("{}")) // 10s after the last sweep: none
	if len(c.entries) != 2 {
		t.Errorf("%d entries 10s after a sweep, want 2: a expired, not yet dropped", len(c.entries))
	}
	now = now.Add(50 * time.Second)
	c.put(b, `"3"`, []byte("{}")) // 60s after the last sweep
	if _, ok := c.entries[a]; ok || len(c.entries) != 1 {
		t.Errorf("after the sweep: %v, want b only", c.entries)
	}
}

// TestEtagKeyOf: a reply is cached by the parent's kind, namespace and name
// (a decorator's object's), and the revision the call is about.
func TestEtagKeyOf(t *testing.T) {
	e := event.New()
	bus.Meta{Address: bus.Address{Controller: "c", Hook: hooks.Sync, ParentUID: "u", Revision: "r1"}, Name: "a",
		Revisions: []string{"r2", "r1"}}.SetOn(&e)
	ctx := hook.ContextWithRequest(t.Context(), &e, slog.Default())
	for _, tc := range []struct {
		ctx     context.Context
		request string
		want    etagKey
	}{
		{t.Context(), `{"parent":{"kind":"Echo","metadata":{"namespace":"ns","name":"a"}}}`, etagKey{"Echo", "ns", "a", ""}},
		{t.Context(), `{"object":{"kind":"StatefulSet","metadata":{"namespace":"ns","name":"a"}}}`, etagKey{"StatefulSet", "ns", "a", ""}},
		{ctx, `{"parent":{"kind":"Echo","metadata":{"name":"a"}}}`, etagKey{"Echo", "", "a", "r1"}},
	} {
		if got := etagKeyOf(tc.ctx, []byte(tc.request)); got != tc.want {
			t.Errorf("%s: key %+v, want %+v", tc.request, got, tc.want)
		}
	}
}
