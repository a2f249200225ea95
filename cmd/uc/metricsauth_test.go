package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	certutil "k8s.io/client-go/util/cert"
)

// TestAuthorized: a request without a token the authenticator accepts is
// 401, one whose user may not get the path 403, one whose user may 200;
// the authorizer is asked about the request's path and lower-case verb.
func TestAuthorized(t *testing.T) {
	authn := authenticator.RequestFunc(func(r *http.Request) (*authenticator.Response, bool, error) {
		switch r.Header.Get("Authorization") {
		case "Bearer reader", "Bearer nobody":
			return &authenticator.Response{User: &user.DefaultInfo{Name: strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")}}, true, nil
		case "":
			return nil, false, nil
		}
		return nil, false, io.ErrUnexpectedEOF // as a rejected token
	})
	var asked []authorizer.Attributes
	authz := authorizer.AuthorizerFunc(func(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
		asked = append(asked, a)
		if a.GetUser().GetName() == "reader" && a.GetPath() == "/metrics" && a.GetVerb() == "get" && !a.IsResourceRequest() {
			return authorizer.DecisionAllow, "", nil
		}
		return authorizer.DecisionNoOpinion, "no rule", nil
	})
	h := authorized(authn, authz, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "metrics") }), slog.New(slog.DiscardHandler))
	for _, tc := range []struct {
		token, path string
		want        int
	}{
		{"", "/metrics", http.StatusUnauthorized},
		{"forged", "/metrics", http.StatusUnauthorized},
		{"nobody", "/metrics", http.StatusForbidden},
		{"reader", "/debug/pprof/", http.StatusForbidden},
		{"reader", "/metrics", http.StatusOK},
	} {
		r := httptest.NewRequest(http.MethodGet, tc.path, nil)
		if tc.token != "" {
			r.Header.Set("Authorization", "Bearer "+tc.token)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != tc.want {
			t.Errorf("token %q, %s: %d %s, want %d", tc.token, tc.path, w.Code, w.Body, tc.want)
		}
		if tc.want == http.StatusOK && w.Body.String() != "metrics" {
			t.Errorf("token %q: body %q, want the handler's", tc.token, w.Body)
		}
	}
	if len(asked) != 3 {
		t.Errorf("the authorizer was asked %d times, want 3 (the authenticated requests)", len(asked))
	}
}

// TestMetricsTLS: without a directory a self-signed certificate is made;
// with one, its tls.crt and tls.key are served, again when they change;
// a missing file is named in the error.
func TestMetricsTLS(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	cfg, err := metricsTLS("", log)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Certificates) != 1 {
		t.Fatalf("self-signed: %d certificates, want 1", len(cfg.Certificates))
	}

	dir := t.TempDir()
	if _, err := metricsTLS(dir, log); err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "tls.crt")) {
		t.Errorf("an empty directory: err %v, want one naming its tls.crt", err)
	}
	write := func(host string, mod time.Time) {
		t.Helper()
		crt, key, err := certutil.GenerateSelfSignedCertKey(host, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		for name, b := range map[string][]byte{"tls.crt": crt, "tls.key": key} {
			path := filepath.Join(dir, name)
			if err := os.WriteFile(path, b, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(path, mod, mod); err != nil {
				t.Fatal(err)
			}
		}
	}
	served := func() string {
		t.Helper()
		cert, err := cfg.GetCertificate(&tls.ClientHelloInfo{})
		if err != nil {
			t.Fatal(err)
		}
		leaf, err := x509.ParseCertificate(cert.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		return strings.Split(leaf.Subject.CommonName, "@")[0] // host@time
	}
	now := time.Now()
	write("first", now.Add(-time.Hour))
	if cfg, err = metricsTLS(dir, log); err != nil {
		t.Fatal(err)
	}
	if got := served(); got != "first" {
		t.Errorf("served %q, want the directory's first", got)
	}
	write("second", now)
	if got := served(); got != "second" {
		t.Errorf("after a renewal served %q, want second", got)
	}
	// A key that does not load keeps the certificate loaded last.
	if err := os.WriteFile(filepath.Join(dir, "tls.key"), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte("x")}), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := served(); got != "second" {
		t.Errorf("with a broken key served %q, want second still", got)
	}
}
