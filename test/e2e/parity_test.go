package e2e

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"universalcontroller.dev/uc/dispatcher/dispatchertest"
	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// parityController is a controller written as a Metacontroller v4.17 user
// writes a CompositeController's spec, with the webhook fields uc took on
// for parity: the hook's TLS and basic auth come from an endpoint config
// (a Secret's custom keys), its replies are cached by ETag and read
// strictly, and it declares the preUpdateChild and postUpdateChild hooks
// Metacontroller never calls. Formatted with the hook's host, the CA's PEM
// and the namespace of the Secrets.
const parityController = `
apiVersion: universalcontroller.dev/v1alpha1
kind: UniversalController
metadata:
  name: parity
spec:
  parentResource:
    apiVersion: hooks.e2e.universalcontroller.dev/v1
    resource: echoes
    labelSelector:
      matchLabels: {hooks.e2e.universalcontroller.dev/controller: parity}
  childResources:
  - apiVersion: v1
    resource: configmaps
    updateStrategy: {method: InPlace}
  generateSelector: true
  resyncPeriodSeconds: 1
  endpointConfigs:
  - host: elsewhere.example:8443
    authorization:
      type: Bearer
      secretRef: {name: nowhere, namespace: %[3]s, key: token}
  - host: %[1]s
    caBundle:
      inline: %[2]q
    clientTLS:
      secretRef: {name: parity-client, namespace: %[3]s}
      certKey: client.pem
      privateKeyKey: client-key.pem
    basicAuth:
      secretRef: {name: parity-login, namespace: %[3]s}
      usernameKey: login
      passwordKey: pin
  hooks:
    sync:
      version: v1
      webhook:
        url: https://%[1]s/sync
        timeout: 5s
        etag:
          enabled: true
          cacheTimeoutSeconds: 600
          cacheCleanupSeconds: 60
        responseUnMarshallMode: strict
    preUpdateChild:
      webhook: {url: https://%[1]s/pre}
    postUpdateChild:
      webhook: {url: https://%[1]s/post}
`

// etagEchoHook is the Echo hook with ETags: the reply's hash is its ETag,
// and a call whose If-None-Match is that ETag gets 304 Not Modified. A
// parent named "extra" gets a reply with a field no sync response has. It
// counts the calls by path, and the 304s.
type etagEchoHook struct {
	mu          sync.Mutex
	calls       map[string]int
	notModified int
}

func (h *etagEchoHook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls[r.URL.Path]++
	var req hooks.SyncRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || r.URL.Path != "/sync" {
		http.Error(w, fmt.Sprintf("%s: %v", r.URL.Path, err), http.StatusBadRequest)
		return
	}
	reply, err := json.Marshal(echoSync(req.Parent, "parity"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if req.Parent.GetName() == "extra" {
		reply = append(reply[:len(reply)-1], `,"surprise":true}`...)
	}
	etag := fmt.Sprintf(`"%x"`, sha256.Sum256(reply))
	if r.Header.Get("If-None-Match") == etag {
		h.notModified++
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Header().Set("ETag", etag)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(reply)
}

func (h *etagEchoHook) counts() (calls map[string]int, notModified int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	calls = map[string]int{}
	for k, v := range h.calls {
		calls[k] = v
	}
	return calls, h.notModified
}

// TestMetacontrollerWebhookFields: a controller using every webhook field
// Metacontroller v4.17 has is stored unchanged — nothing pruned — and
// served as Metacontroller serves it: the endpoint config of the hook's
// host supplies the CA, the client certificate and basic auth from custom
// Secret keys; resyncs get 304s and the cached reply keeps the parent
// synced; a changed parent gets a fresh reply; strict mode rejects a reply
// with an unknown field; preUpdateChild and postUpdateChild are never
// called.
func TestMetacontrollerWebhookFields(t *testing.T) {
	installCRD(t, "test/e2e/testdata/hooks-echo-crd.yaml", echoGVR)
	ns := namespace(t)
	ctx := t.Context()
	ca := dispatchertest.NewCA(t)
	client := ca.Client(t, "uc-dispatcher")
	for _, s := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Name: "parity-client"}, Data: map[string][]byte{"client.pem": client.CertPEM, "client-key.pem": client.KeyPEM}},
		{ObjectMeta: metav1.ObjectMeta{Name: "parity-login"}, StringData: map[string]string{"login": "meta", "pin": "1234"}},
	} {
		if _, err := env.kube.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	hook := &etagEchoHook{calls: map[string]int{}}
	srv := httptest.NewUnstartedServer(requireAuthorization("Basic " + base64.StdEncoding.EncodeToString([]byte("meta:1234")))(hook))
	t.Cleanup(srv.Close)
	srv.TLS = ca.TLSServerConfig(t, true)
	srv.StartTLS()
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}

	var obj map[string]any
	if err := yaml.Unmarshal([]byte(fmt.Sprintf(parityController, u.Host, string(ca.PEM), ns)), &obj); err != nil {
		t.Fatal(err)
	}
	createClusterScoped(t, v1alpha1.Resource, &unstructured.Unstructured{Object: obj})
	stored, err := env.dyn.Resource(v1alpha1.Resource).Get(ctx, "parity", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want, got := asJSON(t, obj["spec"]), asJSON(t, stored.Object["spec"]); !reflect.DeepEqual(want, got) {
		t.Fatalf("the stored spec differs from the one created:\ncreated %v\nstored  %v", want, got)
	}

	createEcho(t, ns, "hello", "parity", "first", "")
	eventually(t, time.Minute, func() error { return echoSynced(ctx, ns, "hello", "parity", "first") })
	// A resync a second gets 304s; the cached reply keeps the ConfigMap.
	eventually(t, time.Minute, func() error {
		if _, n := hook.counts(); n < 3 {
			return fmt.Errorf("%d replies not modified, want 3", n)
		}
		return echoSynced(ctx, ns, "hello", "parity", "first")
	})
	setEcho(t, ns, "hello", "second", "")
	eventually(t, time.Minute, func() error { return echoSynced(ctx, ns, "hello", "parity", "second") })

	createEcho(t, ns, "extra", "parity", "too much", "")
	eventually(t, time.Minute, func() error {
		return syncFailed(ctx, echoGVR, ns, "extra", "InvalidHookReply", `unknown field "surprise"`)
	})

	calls, notModified := hook.counts()
	if calls["/pre"] != 0 || calls["/post"] != 0 {
		t.Errorf("preUpdateChild called %d times, postUpdateChild %d; want never", calls["/pre"], calls["/post"])
	}
	t.Logf("%d sync calls, %d answered 304 Not Modified", calls["/sync"], notModified)
}

// asJSON is v as plain JSON values, so that numbers compare alike whatever
// decoded them.
func asJSON(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}
