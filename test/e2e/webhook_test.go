package e2e

import (
	"bufio"
	"context"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"universalcontroller.dev/uc/dispatcher/dispatchertest"
	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// The hook tests' parent, Echo (testdata/hooks-echo-crd.yaml): its hook
// writes spec.message into a ConfigMap of the same name, with the name of
// the server that answered. Every test registers its own controller, which
// takes the Echoes labelled with its name.
var echoGVR = schema.GroupVersionResource{Group: "hooks.e2e.universalcontroller.dev", Version: "v1", Resource: "echoes"}

const echoLabel = "hooks.e2e.universalcontroller.dev/controller"

// registerEchoController registers a controller of the Echoes labelled with
// its name, with sync as its sync hook, until the test ends.
func registerEchoController(t *testing.T, name string, sync v1alpha1.Hook) {
	t.Helper()
	registerEchoControllerHooks(t, name, v1alpha1.Hooks{Sync: v1alpha1.SyncHook{Hook: sync}})
}

// registerEchoControllerHooks registers a controller of the Echoes labelled
// with its name, with those hooks, each edit applied to it, until the test
// ends.
func registerEchoControllerHooks(t *testing.T, name string, hooks v1alpha1.Hooks, edits ...func(*v1alpha1.UniversalController)) {
	t.Helper()
	installCRD(t, "test/e2e/testdata/hooks-echo-crd.yaml", echoGVR)
	generateSelector := true
	uc := &v1alpha1.UniversalController{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.Group + "/" + v1alpha1.Version, Kind: "UniversalController"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.UniversalControllerSpec{
			ParentResource: v1alpha1.ParentResource{
				ResourceRule:  v1alpha1.ResourceRule{APIVersion: echoGVR.GroupVersion().String(), Resource: echoGVR.Resource},
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{echoLabel: name}},
			},
			ChildResources: []v1alpha1.ChildResource{{
				ResourceRule:   v1alpha1.ResourceRule{APIVersion: "v1", Resource: "configmaps"},
				UpdateStrategy: &v1alpha1.ChildUpdateStrategy{Method: v1alpha1.ChildUpdateInPlace},
			}},
			GenerateSelector: &generateSelector,
			Hooks:            v1alpha1.ControllerHooks{Hooks: hooks},
		},
	}
	for _, edit := range edits {
		edit(uc)
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(uc)
	if err != nil {
		t.Fatal(err)
	}
	createClusterScoped(t, v1alpha1.Resource, &unstructured.Unstructured{Object: obj})
}

// fastDelivery gives up on a request after 3 tries, 200ms and 400ms apart
// (less jitter), each of at most timeout.
func fastDelivery(timeout time.Duration) *v1alpha1.Delivery {
	three := int32(3)
	return &v1alpha1.Delivery{Timeout: &metav1.Duration{Duration: timeout}, MaxDeliveries: &three,
		BackoffDelay: &metav1.Duration{Duration: 200 * time.Millisecond}}
}

func createEcho(t *testing.T, ns, name, controller, message, mode string) *unstructured.Unstructured {
	t.Helper()
	echo := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": echoGVR.GroupVersion().String(), "kind": "Echo",
		"metadata": map[string]any{"name": name, "namespace": ns, "labels": map[string]any{echoLabel: controller}},
		"spec":     map[string]any{"message": message, "mode": mode},
	}}
	created, err := env.dyn.Resource(echoGVR).Namespace(ns).Create(t.Context(), echo, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return created
}

// setEcho changes an Echo's spec.message and spec.mode.
func setEcho(t *testing.T, ns, name, message, mode string) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"message":%q,"mode":%q}}`, message, mode)
	if _, err := env.dyn.Resource(echoGVR).Namespace(ns).Patch(t.Context(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// echoSynced checks that server answered the Echo's latest message: its
// ConfigMap holds both, and the Echo is Synced.
func echoSynced(ctx context.Context, ns, name, server, message string) error {
	cm, err := env.kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if cm.Data["message"] != message || cm.Data["server"] != server {
		return fmt.Errorf("configmap %s/%s holds %v, want message %q from %s", ns, name, cm.Data, message, server)
	}
	echo, err := env.dyn.Resource(echoGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	return syncedTrue(echo)
}

// hookFailed checks that the Echo is Synced=False with reason HookFailed and
// a message holding want, and that a Warning Event says the same.
func hookFailed(ctx context.Context, ns, name, want string) error {
	return syncFailed(ctx, echoGVR, ns, name, "HookFailed", want)
}

// syncFailed checks that a parent is Synced=False with the reason and a
// message holding want, and that a Warning Event says the same.
func syncFailed(ctx context.Context, gvr schema.GroupVersionResource, ns, name, reason, want string) error {
	parent, err := env.dyn.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if c := condition(parent, "Synced"); c == nil || c["status"] != "False" || c["reason"] != reason || !strings.Contains(fmt.Sprint(c["message"]), want) {
		return fmt.Errorf("Synced condition is %v, want False/%s naming %q", c, reason, want)
	}
	events, err := env.kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: fields.SelectorFromSet(fields.Set{
		"involvedObject.name": name, "type": corev1.EventTypeWarning, "reason": reason}).String()})
	if err != nil {
		return err
	}
	for _, e := range events.Items {
		if strings.Contains(e.Message, want) {
			return nil
		}
	}
	return fmt.Errorf("no Warning Event %s naming %q among %d", reason, want, len(events.Items))
}

// echoSync is the Echo hook: a ConfigMap with the parent's message and the
// server's name, and the message in the status.
func echoSync(parent *unstructured.Unstructured, server string) *hooks.SyncResponse {
	message, _, _ := unstructured.NestedString(parent.Object, "spec", "message")
	cm := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": parent.GetName()},
		"data":     map[string]any{"message": message, "server": server},
	}}
	return &hooks.SyncResponse{Status: map[string]any{"message": message}, Children: []*unstructured.Unstructured{cm}}
}

// echoHook is an Echo webhook in the test process, steered by each parent's
// spec.mode: "" answers; "hang" answers only once released, or never if the
// call ends first; "fail" answers 500; "busy" answers the first call of a
// parent with 429 and Retry-After: 2; "slow" takes 300ms. It records the
// calls.
type echoHook struct {
	server      string
	release     chan struct{}
	releaseOnce sync.Once

	mu          sync.Mutex
	calls       map[string][]echoCall // by parent name
	inflight    int
	maxInflight int
}

// newEchoHook makes an echoHook naming itself server, behind wrap, and an
// unstarted test server for it that closes when the test ends.
func newEchoHook(t *testing.T, server string, wrap func(http.Handler) http.Handler) (*echoHook, *httptest.Server) {
	h := &echoHook{server: server, release: make(chan struct{}), calls: map[string][]echoCall{}}
	srv := httptest.NewUnstartedServer(wrap(h))
	t.Cleanup(srv.Close)
	t.Cleanup(h.releaseAll)
	return h, srv
}

func plain(h http.Handler) http.Handler { return h }

// releaseAll lets the hanging calls answer.
func (h *echoHook) releaseAll() { h.releaseOnce.Do(func() { close(h.release) }) }

func (h *echoHook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req hooks.SyncRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	mode, _, _ := unstructured.NestedString(req.Parent.Object, "spec", "mode")
	calls := h.enter(req.Parent, mode)
	defer h.leave()
	switch mode {
	case "hang":
		select {
		case <-h.release:
		case <-r.Context().Done():
			return
		}
	case "fail":
		http.Error(w, "echo hook is broken", http.StatusInternalServerError)
		return
	case "busy":
		if calls == 1 {
			w.Header().Set("Retry-After", "2")
			http.Error(w, "slow down", http.StatusTooManyRequests)
			return
		}
	case "slow":
		time.Sleep(300 * time.Millisecond) // the hook's work
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(echoSync(req.Parent, h.server))
}

// echoCall is one call of the echo hook: when it came, the mode the parent
// it carried asked for, and that parent's resourceVersion (the deliveries
// of one request carry the same).
type echoCall struct {
	at              time.Time
	mode            string
	resourceVersion string
}

// enter records a call for parent in mode and returns how many it had.
func (h *echoHook) enter(parent *unstructured.Unstructured, mode string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	name := parent.GetName()
	h.calls[name] = append(h.calls[name], echoCall{time.Now(), mode, parent.GetResourceVersion()})
	h.inflight++
	h.maxInflight = max(h.maxInflight, h.inflight)
	return len(h.calls[name])
}

func (h *echoHook) leave() {
	h.mu.Lock()
	h.inflight--
	h.mu.Unlock()
}

// callTimes lists when parent's calls came.
func (h *echoHook) callTimes(parent string) []time.Time {
	var times []time.Time
	for _, c := range h.callsOf(parent) {
		times = append(times, c.at)
	}
	return times
}

// callsOf lists parent's calls.
func (h *echoHook) callsOf(parent string) []echoCall {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.calls[parent])
}

// peakConcurrency is the most calls the hook had at once.
func (h *echoHook) peakConcurrency() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.maxInflight
}

func webhookAt(url string) v1alpha1.Hook {
	return v1alpha1.Hook{Webhook: &v1alpha1.Webhook{URL: &url}}
}

// startPythonHook runs a Python webhook (script, from the repository's root)
// on a free port until the test ends, and returns its URL.
func startPythonHook(t *testing.T, script string) string {
	t.Helper()
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Fatalf("python3 is needed for the Python webhook test: %v", err)
	}
	cmd := exec.CommandContext(t.Context(), python, filepath.Join(env.root, script), "0")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Wait() }) // the test's context kills it
	line, err := bufio.NewReader(out).ReadString('\n')
	var port int
	if _, scanErr := fmt.Sscanf(line, "listening on %d", &port); err != nil || scanErr != nil {
		t.Fatalf("python hook did not start: %q, %v, %v", line, err, scanErr)
	}
	return fmt.Sprintf("http://127.0.0.1:%d/sync", port)
}

// TestWebhookPython: an unchanged Metacontroller webhook, written in Python
// on the standard library only, serves a controller: the dispatcher POSTs
// the request as JSON and applies the 200 body.
func TestWebhookPython(t *testing.T) {
	registerEchoController(t, "python-echo", webhookAt(startPythonHook(t, "test/e2e/testdata/hooks-echo-webhook.py")))
	ns := namespace(t)
	createEcho(t, ns, "hello", "python-echo", "hello from Go", "")
	eventually(t, time.Minute, func() error { return echoSynced(t.Context(), ns, "hello", "python", "hello from Go") })
	setEcho(t, ns, "hello", "changed", "")
	eventually(t, time.Minute, func() error { return echoSynced(t.Context(), ns, "hello", "python", "changed") })
}

// TestWebhookTLS: the dispatcher calls webhooks over TLS with a CA bundle
// (inline, from a Secret, from a ConfigMap), a bearer token or basic auth
// from a Secret, and a client certificate; a webhook refusing the
// credentials fails the parent's sync with the status code.
func TestWebhookTLS(t *testing.T) {
	ns := namespace(t)
	ctx := t.Context()
	ca := dispatchertest.NewCA(t)
	client := ca.Client(t, "uc-dispatcher")
	caPEM := string(ca.PEM)
	for _, obj := range []any{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "hook-token"}, StringData: map[string]string{"token": "s3cret"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "wrong-token"}, StringData: map[string]string{"token": "guess"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "hook-basic"}, Type: corev1.SecretTypeBasicAuth, StringData: map[string]string{"username": "uc", "password": "pa55"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "hook-ca"}, StringData: map[string]string{"ca.crt": caPEM}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "hook-client"}, Type: corev1.SecretTypeTLS, Data: map[string][]byte{"tls.crt": client.CertPEM, "tls.key": client.KeyPEM}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "hook-ca"}, Data: map[string]string{"ca.crt": caPEM}},
	} {
		var err error
		switch o := obj.(type) {
		case *corev1.Secret:
			_, err = env.kube.CoreV1().Secrets(ns).Create(ctx, o, metav1.CreateOptions{})
		case *corev1.ConfigMap:
			_, err = env.kube.CoreV1().ConfigMaps(ns).Create(ctx, o, metav1.CreateOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	inline := &v1alpha1.CABundle{Inline: &caPEM}
	token := func(secret string) *v1alpha1.Authorization {
		return &v1alpha1.Authorization{SecretRef: v1alpha1.KeyReference{Name: secret, Namespace: ns}}
	}
	bearer := requireAuthorization("Bearer s3cret")
	for _, tc := range []struct {
		name        string
		conn        v1alpha1.Connection
		requireCert bool
		check       func(http.Handler) http.Handler
		failsNaming string
	}{
		{name: "bearer", conn: v1alpha1.Connection{CABundle: inline, Authorization: token("hook-token")}, check: bearer},
		{name: "basic", conn: v1alpha1.Connection{CABundle: &v1alpha1.CABundle{SecretRef: &v1alpha1.KeyReference{Name: "hook-ca", Namespace: ns}},
			BasicAuth: &v1alpha1.BasicAuth{SecretRef: v1alpha1.SecretReference{Name: "hook-basic", Namespace: ns}}}, check: requireAuthorization("Basic dWM6cGE1NQ==")},
		{name: "ca-configmap", conn: v1alpha1.Connection{CABundle: &v1alpha1.CABundle{ConfigMapRef: &v1alpha1.KeyReference{Name: "hook-ca", Namespace: ns}}}, check: plain},
		{name: "mtls", conn: v1alpha1.Connection{CABundle: inline, ClientTLS: &v1alpha1.ClientTLS{SecretRef: v1alpha1.SecretReference{Name: "hook-client", Namespace: ns}}},
			requireCert: true, check: plain},
		{name: "wrong-token", conn: v1alpha1.Connection{CABundle: inline, Authorization: token("wrong-token")}, check: bearer, failsNaming: "401 Unauthorized"},
		{name: "unknown-ca", conn: v1alpha1.Connection{}, check: plain, failsNaming: "certificate signed by unknown authority"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			controller := "tls-" + tc.name
			_, srv := newEchoHook(t, controller, tc.check)
			srv.TLS = ca.TLSServerConfig(t, tc.requireCert)
			srv.StartTLS()
			url := srv.URL + "/sync"
			webhook := &v1alpha1.Webhook{URL: &url, Connection: tc.conn}
			registerEchoController(t, controller, v1alpha1.Hook{Webhook: webhook, Delivery: fastDelivery(5 * time.Second)})
			createEcho(t, ns, controller, controller, "over TLS", "")
			if tc.failsNaming != "" {
				eventually(t, time.Minute, func() error { return hookFailed(ctx, ns, controller, tc.failsNaming) })
				return
			}
			eventually(t, time.Minute, func() error { return echoSynced(ctx, ns, controller, controller, "over TLS") })
		})
	}
}

// requireAuthorization answers 401 to a request without that Authorization.
func requireAuthorization(want string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), []byte(want)) != 1 {
				http.Error(w, "who are you?", http.StatusUnauthorized)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}
