package dispatcher

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"universalcontroller.dev/uc/dispatcher/dispatchertest"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// TestWebhookClient builds the client of each webhook auth and TLS setting
// from Secrets and ConfigMaps, and calls a TLS server that reports the
// Authorization header and client certificate it got.
func TestWebhookClient(t *testing.T) {
	ca := dispatchertest.NewCA(t)
	client := ca.Client(t, "uc-dispatcher")
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cn := ""
		if certs := r.TLS.PeerCertificates; len(certs) > 0 {
			cn = certs[0].Subject.CommonName
		}
		_, _ = w.Write([]byte(r.Header.Get("Authorization") + "|" + cn))
	}))
	srv.TLS = ca.TLSServerConfig(t, false)
	srv.StartTLS()
	defer srv.Close()

	caPEM := string(ca.PEM)
	objects := []runtime.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "token", Namespace: "hooks"}, Data: map[string][]byte{"token": []byte("s3cret\n"), "other": []byte("t2")}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "basic", Namespace: "hooks"}, Type: corev1.SecretTypeBasicAuth,
			Data: map[string][]byte{"username": []byte("uc"), "password": []byte("pw")}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "ca", Namespace: "hooks"}, Data: map[string][]byte{"ca.crt": ca.PEM}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "ca", Namespace: "hooks"}, Data: map[string]string{"bundle.pem": caPEM}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "client", Namespace: "hooks"}, Type: corev1.SecretTypeTLS,
			Data: map[string][]byte{"tls.crt": client.CertPEM, "tls.key": client.KeyPEM}},
	}
	inline := &v1alpha1.CABundle{Inline: &caPEM}
	for _, tc := range []struct {
		name    string
		webhook v1alpha1.Webhook
		want    string // what the server saw, or the error
	}{
		{"no CA", v1alpha1.Webhook{}, "certificate signed by unknown authority"},
		{"inline CA", v1alpha1.Webhook{CABundle: inline}, "|"},
		{"CA from Secret", v1alpha1.Webhook{CABundle: &v1alpha1.CABundle{SecretRef: &v1alpha1.KeyReference{Name: "ca", Namespace: "hooks"}}}, "|"},
		{"CA from ConfigMap", v1alpha1.Webhook{CABundle: &v1alpha1.CABundle{ConfigMapRef: &v1alpha1.KeyReference{Name: "ca", Namespace: "hooks", Key: "bundle.pem"}}}, "|"},
		{"CA key missing", v1alpha1.Webhook{CABundle: &v1alpha1.CABundle{ConfigMapRef: &v1alpha1.KeyReference{Name: "ca", Namespace: "hooks"}}}, `configmap hooks/ca has no key "ca.crt"`},
		{"two CA sources", v1alpha1.Webhook{CABundle: &v1alpha1.CABundle{Inline: &caPEM, SecretRef: &v1alpha1.KeyReference{Name: "ca", Namespace: "hooks"}}}, "set exactly one"},
		{"CA Secret without the key", v1alpha1.Webhook{CABundle: &v1alpha1.CABundle{SecretRef: &v1alpha1.KeyReference{Name: "token", Namespace: "hooks"}}}, `secret hooks/token has no key "ca.crt"`},
		{"not PEM", v1alpha1.Webhook{CABundle: &v1alpha1.CABundle{SecretRef: &v1alpha1.KeyReference{Name: "token", Namespace: "hooks", Key: "token"}}}, "no PEM certificate"},
		{"bearer", v1alpha1.Webhook{CABundle: inline, Authorization: &v1alpha1.Authorization{Credentials: v1alpha1.KeyReference{Name: "token", Namespace: "hooks"}}}, "Bearer s3cret|"},
		{"other scheme and key", v1alpha1.Webhook{CABundle: inline, Authorization: &v1alpha1.Authorization{Type: "Token", Credentials: v1alpha1.KeyReference{Name: "token", Namespace: "hooks", Key: "other"}}}, "Token t2|"},
		{"token Secret missing", v1alpha1.Webhook{CABundle: inline, Authorization: &v1alpha1.Authorization{Credentials: v1alpha1.KeyReference{Name: "nope", Namespace: "hooks"}}}, `authorization: secret hooks/nope: secrets "nope" not found`},
		{"basic", v1alpha1.Webhook{CABundle: inline, BasicAuth: &v1alpha1.BasicAuth{SecretRef: v1alpha1.SecretReference{Name: "basic", Namespace: "hooks"}}}, "Basic dWM6cHc=|"},
		{"bearer and basic", v1alpha1.Webhook{CABundle: inline,
			Authorization: &v1alpha1.Authorization{Credentials: v1alpha1.KeyReference{Name: "token", Namespace: "hooks"}},
			BasicAuth:     &v1alpha1.BasicAuth{SecretRef: v1alpha1.SecretReference{Name: "basic", Namespace: "hooks"}}}, "set at most one"},
		{"client certificate", v1alpha1.Webhook{CABundle: inline, ClientTLS: &v1alpha1.ClientTLS{SecretRef: v1alpha1.SecretReference{Name: "client", Namespace: "hooks"}}}, "|uc-dispatcher"},
		{"client certificate not a pair", v1alpha1.Webhook{CABundle: inline, ClientTLS: &v1alpha1.ClientTLS{SecretRef: v1alpha1.SecretReference{Name: "basic", Namespace: "hooks"}}}, "clientTLS: secret hooks/basic"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := webhookClient(t.Context(), fake.NewClientset(objects...), &tc.webhook)
			var got string
			if err == nil {
				got, err = get(c, srv.URL)
			}
			if err != nil {
				got = err.Error()
			}
			if !strings.Contains(got, tc.want) || (err == nil) != strings.Contains(tc.want, "|") {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func get(c *http.Client, url string) (string, error) {
	resp, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}
