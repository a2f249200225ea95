package testbed

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"path/filepath"
	"time"
)

// CA is a certificate authority that issues the test bed's certificates.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// PEM is the CA certificate.
	PEM []byte
}

// NewCA makes a CA named cn.
func NewCA(cn string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate CA key: %w", err)
	}
	tmpl := certTemplate(cn)
	tmpl.IsCA = true
	tmpl.BasicConstraintsValid = true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("create CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse CA certificate: %w", err)
	}
	return &CA{cert: cert, key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// Usage says what a certificate is for.
type Usage int

// Usages of issued certificates.
const (
	// Server certificates are valid for 127.0.0.1 and localhost.
	Server Usage = iota
	// Client certificates authenticate cn.
	Client
)

// Issue makes a certificate for cn, and its key, both PEM.
func (ca *CA) Issue(cn string, usage Usage) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate key of %s: %w", cn, err)
	}
	tmpl := certTemplate(cn)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	if usage == Server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
		tmpl.DNSNames = []string{"localhost"}
	} else {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, nil, fmt.Errorf("create certificate of %s: %w", cn, err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("marshal key of %s: %w", cn, err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), nil
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

// TLSFiles are the PEM files of a TLS setup on loopback: a CA, a server
// certificate signed by it, and a client certificate signed by it.
type TLSFiles struct {
	CA, Cert, Key, ClientCert, ClientKey string
}

// WriteTLS makes a CA, a server certificate for 127.0.0.1 and a client
// certificate for client, and writes them into dir.
func WriteTLS(dir, client string) (*TLSFiles, error) {
	ca, err := NewCA("uc-testbed-tls-ca")
	if err != nil {
		return nil, err
	}
	cert, key, err := ca.Issue("127.0.0.1", Server)
	if err != nil {
		return nil, err
	}
	ccert, ckey, err := ca.Issue(client, Client)
	if err != nil {
		return nil, err
	}
	f := &TLSFiles{
		CA: filepath.Join(dir, "ca.pem"), Cert: filepath.Join(dir, "server.pem"), Key: filepath.Join(dir, "server-key.pem"),
		ClientCert: filepath.Join(dir, "client.pem"), ClientKey: filepath.Join(dir, "client-key.pem"),
	}
	return f, writeFiles(map[string][]byte{f.CA: ca.PEM, f.Cert: cert, f.Key: key, f.ClientCert: ccert, f.ClientKey: ckey})
}
