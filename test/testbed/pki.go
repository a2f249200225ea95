package testbed

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"

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
	ca, err := NewCA("uc-testbed-ca")
	if err != nil {
		return err
	}
	cert, key, err := ca.Issue("kube-apiserver", Server)
	if err != nil {
		return err
	}
	p.caPEM = ca.PEM
	return writeFiles(map[string][]byte{p.caFile: p.caPEM, p.certFile: cert, p.keyFile: key})
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
