package testbed

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// pki holds the test bed's credentials, all written under one directory: a
// CA, the apiserver's serving certificate signed by it, the service-account
// signing key, and the admin user's bearer token.
type pki struct {
	caPEM     []byte
	token     string
	caFile    string
	certFile  string
	keyFile   string
	saKeyFile string
	tokenFile string
}

// writePKI generates fresh credentials into dir.
func writePKI(dir string) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create pki dir: %w", err)
	}
	p := &pki{
		caFile:    filepath.Join(dir, "ca.crt"),
		certFile:  filepath.Join(dir, "apiserver.crt"),
		keyFile:   filepath.Join(dir, "apiserver.key"),
		saKeyFile: filepath.Join(dir, "sa.key"),
		tokenFile: filepath.Join(dir, "tokens.csv"),
	}
	if err := p.writeServingCert(); err != nil {
		return nil, err
	}
	if err := p.writeServiceAccountKey(); err != nil {
		return nil, err
	}
	if err := p.writeToken(); err != nil {
		return nil, err
	}
	return p, nil
}

// writeServingCert creates a CA and a serving certificate for 127.0.0.1
// and localhost signed by it.
func (p *pki) writeServingCert() error {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generate CA key: %w", err)
	}
	caTmpl := certTemplate("uc-testbed-ca")
	caTmpl.IsCA = true
	caTmpl.BasicConstraintsValid = true
	caTmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return fmt.Errorf("create CA certificate: %w", err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return fmt.Errorf("parse CA certificate: %w", err)
	}

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generate serving key: %w", err)
	}
	tmpl := certTemplate("kube-apiserver")
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
	tmpl.DNSNames = []string{"localhost"}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return fmt.Errorf("create serving certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return fmt.Errorf("marshal serving key: %w", err)
	}

	p.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	return writeFiles(map[string][]byte{
		p.caFile:   p.caPEM,
		p.certFile: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		p.keyFile:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	})
}

// certTemplate returns a certificate template valid for a year.
func certTemplate(cn string) *x509.Certificate {
	serial, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().AddDate(1, 0, 0),
	}
}

// writeServiceAccountKey writes the RSA key that signs service-account
// tokens; kube-apiserver derives the verification key from it.
func (p *pki) writeServiceAccountKey() error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return fmt.Errorf("generate service-account key: %w", err)
	}
	block := &pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}
	return writeFiles(map[string][]byte{p.saKeyFile: pem.EncodeToMemory(block)})
}

// writeToken writes a static token file with one admin user in group
// system:masters.
func (p *pki) writeToken() error {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return fmt.Errorf("generate admin token: %w", err)
	}
	p.token = hex.EncodeToString(b)
	line := fmt.Sprintf("%s,admin,admin,\"system:masters\"\n", p.token)
	return writeFiles(map[string][]byte{p.tokenFile: []byte(line)})
}

// writeKubeconfig writes an admin kubeconfig for the apiserver at url.
func (p *pki) writeKubeconfig(path, url string) error {
	cfg := clientcmdapi.Config{
		Clusters: map[string]*clientcmdapi.Cluster{
			"uc-testbed": {Server: url, CertificateAuthorityData: p.caPEM},
		},
		AuthInfos: map[string]*clientcmdapi.AuthInfo{
			"admin": {Token: p.token},
		},
		Contexts: map[string]*clientcmdapi.Context{
			"uc-testbed": {Cluster: "uc-testbed", AuthInfo: "admin"},
		},
		CurrentContext: "uc-testbed",
	}
	if err := clientcmd.WriteToFile(cfg, path); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	return nil
}

func writeFiles(files map[string][]byte) error {
	for path, data := range files {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return fmt.Errorf("write %s: %w", filepath.Base(path), err)
		}
	}
	return nil
}
