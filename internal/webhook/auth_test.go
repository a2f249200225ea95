package webhook

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
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
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "custom", Namespace: "hooks"}, Data: map[string][]byte{
			"user": []byte("alice\n"), "pass": []byte(" wonder\n"), "colon": []byte("a:b"), "cert.pem": client.CertPEM, "key.pem": client.KeyPEM}},
	}
	inline := &v1alpha1.CABundle{Inline: &caPEM}
	token := func(typ, key string) *v1alpha1.Authorization {
		return &v1alpha1.Authorization{Type: typ, SecretRef: v1alpha1.KeyReference{Name: "token", Namespace: "hooks", Key: key}}
	}
	basic := func(secret, usernameKey, passwordKey string) *v1alpha1.BasicAuth {
		return &v1alpha1.BasicAuth{SecretRef: v1alpha1.SecretReference{Name: secret, Namespace: "hooks"}, UsernameKey: usernameKey, PasswordKey: passwordKey}
	}
	clientTLS := func(secret, certKey, keyKey string) *v1alpha1.ClientTLS {
		return &v1alpha1.ClientTLS{SecretRef: v1alpha1.SecretReference{Name: secret, Namespace: "hooks"}, CertKey: certKey, PrivateKeyKey: keyKey}
	}
	for _, tc := range []struct {
		name string
		conn v1alpha1.Connection
		want string // what the server saw, or the error
	}{
		{"no CA", v1alpha1.Connection{}, "certificate signed by unknown authority"},
		{"inline CA", v1alpha1.Connection{CABundle: inline}, "|"},
		{"CA from Secret", v1alpha1.Connection{CABundle: &v1alpha1.CABundle{SecretRef: &v1alpha1.KeyReference{Name: "ca", Namespace: "hooks"}}}, "|"},
		{"CA from ConfigMap", v1alpha1.Connection{CABundle: &v1alpha1.CABundle{ConfigMapRef: &v1alpha1.KeyReference{Name: "ca", Namespace: "hooks", Key: "bundle.pem"}}}, "|"},
		{"CA key missing", v1alpha1.Connection{CABundle: &v1alpha1.CABundle{ConfigMapRef: &v1alpha1.KeyReference{Name: "ca", Namespace: "hooks"}}}, `configmap hooks/ca has no key "ca.crt"`},
		{"two CA sources", v1alpha1.Connection{CABundle: &v1alpha1.CABundle{Inline: &caPEM, SecretRef: &v1alpha1.KeyReference{Name: "ca", Namespace: "hooks"}}}, "set exactly one"},
		{"CA Secret without the key", v1alpha1.Connection{CABundle: &v1alpha1.CABundle{SecretRef: &v1alpha1.KeyReference{Name: "token", Namespace: "hooks"}}}, `secret hooks/token has no key "ca.crt"`},
		{"not PEM", v1alpha1.Connection{CABundle: &v1alpha1.CABundle{SecretRef: &v1alpha1.KeyReference{Name: "token", Namespace: "hooks", Key: "token"}}}, "no PEM certificate"},
		{"bearer", v1alpha1.Connection{CABundle: inline, Authorization: token("", "")}, "Bearer s3cret|"},
		{"other scheme and key", v1alpha1.Connection{CABundle: inline, Authorization: token("Token", "other")}, "Token t2|"},
		{"type Basic refused", v1alpha1.Connection{CABundle: inline, Authorization: token(" basic", "")}, "type Basic is not supported; use basicAuth"},
		{"token Secret missing", v1alpha1.Connection{CABundle: inline, Authorization: &v1alpha1.Authorization{SecretRef: v1alpha1.KeyReference{Name: "nope", Namespace: "hooks"}}}, `authorization: secret hooks/nope: secrets "nope" not found`},
		{"basic", v1alpha1.Connection{CABundle: inline, BasicAuth: basic("basic", "", "")}, "Basic dWM6cHc=|"},
		{"basic, custom keys", v1alpha1.Connection{CABundle: inline, BasicAuth: basic("custom", "user", "pass")}, "Basic YWxpY2U6d29uZGVy|"}, // alice:wonder, trimmed
		{"basic, password key missing", v1alpha1.Connection{CABundle: inline, BasicAuth: basic("custom", "user", "")}, `basicAuth: secret hooks/custom has no key "password"`},
		{"basic, colon in username", v1alpha1.Connection{CABundle: inline, BasicAuth: basic("custom", "colon", "pass")}, "username is empty or holds a colon"},
		{"bearer and basic", v1alpha1.Connection{CABundle: inline, Authorization: token("", ""), BasicAuth: basic("basic", "", "")}, "set at most one"},
		{"client certificate", v1alpha1.Connection{CABundle: inline, ClientTLS: clientTLS("client", "", "")}, "|uc-dispatcher"},
		{"client certificate, custom keys", v1alpha1.Connection{CABundle: inline, ClientTLS: clientTLS("custom", "cert.pem", "key.pem")}, "|uc-dispatcher"},
		{"client certificate key missing", v1alpha1.Connection{CABundle: inline, ClientTLS: clientTLS("custom", "cert.pem", "")}, `clientTLS: secret hooks/custom has no key "tls.key"`},
		{"client certificate not a pair", v1alpha1.Connection{CABundle: inline, ClientTLS: clientTLS("custom", "cert.pem", "user")}, "clientTLS: secret hooks/custom"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := webhookClient(t.Context(), fake.NewClientset(objects...), tc.conn)
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

// TestConnectionFor: a webhook's own TLS and credentials win whole; without
// them, the first endpoint config of the URL's host, matched without regard
// to case and with the scheme's default port on either side.
func TestConnectionFor(t *testing.T) {
	conn := func(name string) v1alpha1.Connection {
		return v1alpha1.Connection{BasicAuth: &v1alpha1.BasicAuth{SecretRef: v1alpha1.SecretReference{Name: name, Namespace: "hooks"}}}
	}
	endpoints := []v1alpha1.EndpointConfig{
		{Host: "hook.hooks:8443", Connection: conn("port-8443")},
		{Host: "HOOK.hooks", Connection: conn("default-port")},
		{Host: "hook.hooks", Connection: conn("second-match")},
		{Host: "plain.hooks:80", Connection: conn("plain-80")},
		{Host: "[::1]", Connection: conn("ipv6")},
	}
	for _, tc := range []struct {
		url  string
		own  v1alpha1.Connection
		want string // the Secret of the connection used; "" for none
	}{
		{"https://hook.hooks:8443/sync", v1alpha1.Connection{}, "port-8443"},
		{"https://hook.hooks/sync", v1alpha1.Connection{}, "default-port"},
		{"https://Hook.Hooks:443/sync", v1alpha1.Connection{}, "default-port"},
		{"http://hook.hooks/sync", v1alpha1.Connection{}, "default-port"},
		{"http://hook.hooks:8080/sync", v1alpha1.Connection{}, ""},
		{"http://plain.hooks/sync", v1alpha1.Connection{}, "plain-80"},
		{"https://plain.hooks/sync", v1alpha1.Connection{}, ""},
		{"https://[::1]/sync", v1alpha1.Connection{}, "ipv6"},
		{"https://other.hooks/sync", v1alpha1.Connection{}, ""},
		{"https://hook.hooks:8443/sync", conn("own"), "own"},
		{"https://hook.hooks:8443/sync", v1alpha1.Connection{CABundle: &v1alpha1.CABundle{}}, ""}, // its own caBundle alone: no endpoint's credentials
	} {
		u, err := url.Parse(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		got := connectionFor(&v1alpha1.Webhook{Connection: tc.own}, u, endpoints)
		name := ""
		if got.BasicAuth != nil {
			name = got.BasicAuth.SecretRef.Name
		}
		if name != tc.want {
			t.Errorf("%s with own %+v: connection of %q, want %q", tc.url, tc.own, name, tc.want)
		}
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
