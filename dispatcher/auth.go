package dispatcher

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// webhookClient makes the HTTP client a webhook's caBundle, authorization,
// basicAuth and clientTLS ask for, reading the Secrets and ConfigMaps they
// name.
func webhookClient(ctx context.Context, kube kubernetes.Interface, w *v1alpha1.Webhook) (*http.Client, error) {
	tlsConfig, err := webhookTLS(ctx, kube, w)
	if err != nil {
		return nil, err
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = tlsConfig
	authorization, err := authorizationHeader(ctx, kube, w)
	if err != nil || authorization == "" {
		return &http.Client{Transport: transport}, err
	}
	return &http.Client{Transport: withHeader{transport, "Authorization", authorization}}, nil
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

func webhookTLS(ctx context.Context, kube kubernetes.Interface, w *v1alpha1.Webhook) (*tls.Config, error) {
	config := &tls.Config{MinVersion: tls.VersionTLS12}
	if w.CABundle != nil {
		pem, err := caBundle(ctx, kube, w.CABundle)
		if err != nil {
			return nil, fmt.Errorf("caBundle: %w", err)
		}
		config.RootCAs = x509.NewCertPool()
		if !config.RootCAs.AppendCertsFromPEM(pem) {
			return nil, errors.New("caBundle: no PEM certificate in it")
		}
	}
	if w.ClientTLS != nil {
		s, err := secret(ctx, kube, w.ClientTLS.SecretRef.Namespace, w.ClientTLS.SecretRef.Name)
		if err != nil {
			return nil, fmt.Errorf("clientTLS: %w", err)
		}
		cert, err := tls.X509KeyPair(s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey])
		if err != nil {
			return nil, fmt.Errorf("clientTLS: secret %s/%s: %w", s.Namespace, s.Name, err)
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
	key := keyOr(ref, "ca.crt")
	v, ok := cm.Data[key]
	if !ok {
		return nil, fmt.Errorf("configmap %s/%s has no key %q", ref.Namespace, ref.Name, key)
	}
	return []byte(v), nil
}

// authorizationHeader is the Authorization header of a webhook, or "".
func authorizationHeader(ctx context.Context, kube kubernetes.Interface, w *v1alpha1.Webhook) (string, error) {
	switch {
	case w.Authorization != nil && w.BasicAuth != nil:
		return "", errors.New("set at most one of authorization and basicAuth")
	case w.Authorization != nil:
		credentials, err := secretKey(ctx, kube, w.Authorization.Credentials, "token")
		if err != nil {
			return "", fmt.Errorf("authorization: %w", err)
		}
		scheme := w.Authorization.Type
		if scheme == "" {
			scheme = "Bearer"
		}
		return scheme + " " + strings.TrimSpace(string(credentials)), nil
	case w.BasicAuth != nil:
		ref := w.BasicAuth.SecretRef
		s, err := secret(ctx, kube, ref.Namespace, ref.Name)
		if err != nil {
			return "", fmt.Errorf("basicAuth: %w", err)
		}
		user, password := s.Data[corev1.BasicAuthUsernameKey], s.Data[corev1.BasicAuthPasswordKey]
		if len(user) == 0 {
			return "", fmt.Errorf("basicAuth: secret %s/%s has no %s", ref.Namespace, ref.Name, corev1.BasicAuthUsernameKey)
		}
		return "Basic " + base64.StdEncoding.EncodeToString([]byte(string(user)+":"+string(password))), nil
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
	s, err := secret(ctx, kube, ref.Namespace, ref.Name)
	if err != nil {
		return nil, err
	}
	key := keyOr(ref, defaultKey)
	v, ok := s.Data[key]
	if !ok {
		return nil, fmt.Errorf("secret %s/%s has no key %q", ref.Namespace, ref.Name, key)
	}
	return v, nil
}

func keyOr(ref v1alpha1.KeyReference, def string) string {
	if ref.Key == "" {
		return def
	}
	return ref.Key
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
