package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	certutil "k8s.io/client-go/util/cert"
)

// TestMetricsTLS: without a directory a self-signed certificate is made;
// with one, its tls.crt and tls.key are served, again when they change;
// a missing file is named in the error.
func TestMetricsTLS(t *testing.T) {
	log := discardLog
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
