package webhook

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// webhookClient makes the HTTP client a connection's caBundle,
// authorization, basicAuth and clientTLS ask for, reading the Secrets and
// ConfigMaps they name.
func webhookClient(ctx context.Context, kube kubernetes.Interface, c v1alpha1.Connection) (*http.Client, error) {
	tlsConfig, err := webhookTLS(ctx, kube, c)
	if err != nil {
		return nil, err
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = tlsConfig
	authorization, err := authorizationHeader(ctx, kube, c)
	if err != nil || authorization == "" {
		return &http.Client{Transport: traced(transport)}, err
	}
	return &http.Client{Transport: traced(withHeader{transport, "Authorization", authorization})}, nil
}

// connectionFor is what a webhook at u is called with, as Metacontroller
// resolves it: the webhook's own settings when it has any, else those of
// the first endpoint config for u's host, else none.
func connectionFor(w *v1alpha1.Webhook, u *url.URL, endpoints []v1alpha1.EndpointConfig) v1alpha1.Connection {
	if !w.Connection.IsZero() {
		return w.Connection
	}
	for _, e := range endpoints {
		if hostMatches(u, e.Host) {
			return e.Connection
		}
	}
	return v1alpha1.Connection{}
}

// defaultPorts are the ports a URL without one is on, by scheme.
var defaultPorts = map[string]string{"http": "80", "https": "443"}

// hostMatches tells whether host, "host" or "host:port", names u's host,
// without regard to case; a missing port is the scheme's default, on
// either side.
func hostMatches(u *url.URL, host string) bool {
	port := u.Port()
	if port == "" {
		port = defaultPorts[u.Scheme]
	}
	if _, _, err := net.SplitHostPort(host); err != nil {
		host = net.JoinHostPort(strings.Trim(host, "[]"), defaultPorts[u.Scheme])
	}
	return strings.EqualFold(host, net.JoinHostPort(u.Hostname(), port))
}

// withHeader sets a header on every request.
type withHeader struct {
	next        http.RoundTripper
	name, value string
}

func (h withHeader) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(h.name, h.value)
	return h.next.RoundTrip(r)
}

func webhookTLS(ctx context.Context, kube kubernetes.Interface, c v1alpha1.Connection) (*tls.Config, error) {
	config := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.CABundle != nil {
		pem, err := caBundle(ctx, kube, c.CABundle)
		if err != nil {
			return nil, fmt.Errorf("caBundle: %w", err)
		}
		config.RootCAs = x509.NewCertPool()
		if !config.RootCAs.AppendCertsFromPEM(pem) {
			return nil, errors.New("caBundle: no PEM certificate in it")
		}
	}
	if c.ClientTLS != nil {
		ref := c.ClientTLS.SecretRef
		data, err := secretKeys(ctx, kube, ref, cmp.Or(c.ClientTLS.CertKey, corev1.TLSCertKey), cmp.Or(c.ClientTLS.PrivateKeyKey, corev1.TLSPrivateKeyKey))
		if err != nil {
			return nil, fmt.Errorf("clientTLS: %w", err)
		}
		cert, err := tls.X509KeyPair(data[0], data[1])
		if err != nil {
			return nil, fmt.Errorf("clientTLS: secret %s/%s: %w", ref.Namespace, ref.Name, err)
		}
		config.Certificates = []tls.Certificate{cert}
	}
	return config, nil
}

// caBundle reads the PEM certificates of a CABundle from the one place it
// names.
func caBundle(ctx context.Context, kube kubernetes.Interface, b *v1alpha1.CABundle) ([]byte, error) {
	switch {
	case countSet(b.Inline != nil, b.SecretRef != nil, b.ConfigMapRef != nil) != 1:
		return nil, errors.New("set exactly one of inline, secretRef and configMapRef")
	case b.Inline != nil:
		return []byte(*b.Inline), nil
	case b.SecretRef != nil:
		return secretKey(ctx, kube, *b.SecretRef, "ca.crt")
	}
	ref := *b.ConfigMapRef
	cm, err := kube.CoreV1().ConfigMaps(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("configmap %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	key := cmp.Or(ref.Key, "ca.crt")
	v, ok := cm.Data[key]
	if !ok {
		return nil, fmt.Errorf("configmap %s/%s has no key %q", ref.Namespace, ref.Name, key)
	}
	return []byte(v), nil
}

// authorizationHeader is the Authorization header of a connection, or "".
func authorizationHeader(ctx context.Context, kube kubernetes.Interface, c v1alpha1.Connection) (string, error) {
	switch {
	case c.Authorization != nil && c.BasicAuth != nil:
		return "", errors.New("set at most one of authorization and basicAuth")
	case c.Authorization != nil:
		scheme := cmp.Or(strings.TrimSpace(c.Authorization.Type), "Bearer")
		if strings.EqualFold(scheme, "Basic") {
			return "", errors.New("authorization: type Basic is not supported; use basicAuth")
		}
		credentials, err := secretKey(ctx, kube, c.Authorization.SecretRef, "token")
		if err != nil {
			return "", fmt.Errorf("authorization: %w", err)
		}
		return scheme + " " + strings.TrimSpace(string(credentials)), nil
	case c.BasicAuth != nil:
		b := c.BasicAuth
		data, err := secretKeys(ctx, kube, b.SecretRef, cmp.Or(b.UsernameKey, corev1.BasicAuthUsernameKey), cmp.Or(b.PasswordKey, corev1.BasicAuthPasswordKey))
		if err != nil {
			return "", fmt.Errorf("basicAuth: %w", err)
		}
		user, password := strings.TrimSpace(string(data[0])), strings.TrimSpace(string(data[1]))
		if user == "" || strings.Contains(user, ":") {
			return "", fmt.Errorf("basicAuth: secret %s/%s: the username is empty or holds a colon", b.SecretRef.Namespace, b.SecretRef.Name)
		}
		return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+password)), nil
	}
	return "", nil
}

func secret(ctx context.Context, kube kubernetes.Interface, namespace, name string) (*corev1.Secret, error) {
	s, err := kube.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("secret %s/%s: %w", namespace, name, err)
	}
	return s, nil
}

func secretKey(ctx context.Context, kube kubernetes.Interface, ref v1alpha1.KeyReference, defaultKey string) ([]byte, error) {
	data, err := secretKeys(ctx, kube, v1alpha1.SecretReference{Name: ref.Name, Namespace: ref.Namespace}, cmp.Or(ref.Key, defaultKey))
	if err != nil {
		return nil, err
	}
	return data[0], nil
}

// secretKeys reads keys of a Secret, each of which it must have.
func secretKeys(ctx context.Context, kube kubernetes.Interface, ref v1alpha1.SecretReference, keys ...string) ([][]byte, error) {
	s, err := secret(ctx, kube, ref.Namespace, ref.Name)
	if err != nil {
		return nil, err
	}
	out := make([][]byte, len(keys))
	for i, key := range keys {
		v, ok := s.Data[key]
		if !ok {
			return nil, fmt.Errorf("secret %s/%s has no key %q", ref.Namespace, ref.Name, key)
		}
		out[i] = v
	}
	return out, nil
}

func countSet(set ...bool) int {
	n := 0
	for _, s := range set {
		if s {
			n++
		}
	}
	return n
}
