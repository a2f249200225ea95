// Package natstls makes the certificates of uc's NATS servers when no
// cert-manager issues them: a CA, and one server certificate every server
// of the StatefulSet presents, to clients (port 4222) and to the other
// servers (routes, port 6222, mutual TLS: it authenticates as a client
// too). The certificate is valid for the client Service and for every
// server's name under the headless Service (DNSNames), so that clients and
// routes verify the servers' names.
package natstls

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"time"
)

// DNSNames are the names the NATS servers of a StatefulSet answer to: the
// client Service and any server under the headless Service (a wildcard),
// each short, with the namespace, with .svc and fully qualified.
func DNSNames(service, headless, namespace, clusterDomain string) []string {
	var names []string
	for _, host := range []string{service, "*." + headless} {
		names = append(names, host, host+"."+namespace, host+"."+namespace+".svc", host+"."+namespace+".svc."+clusterDomain)
	}
	return names
}

// CA is a certificate authority: its certificate and key.
type CA struct {
	Cert *x509.Certificate
	Key  crypto.Signer
}

// NewCA makes a CA named cn, valid for validity.
func NewCA(cn string, validity time.Duration) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate the key of CA %s: %w", cn, err)
	}
	tmpl, err := template(cn, validity)
	if err != nil {
		return nil, err
	}
	tmpl.IsCA = true
	tmpl.BasicConstraintsValid = true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("create the certificate of CA %s: %w", cn, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse the certificate of CA %s: %w", cn, err)
	}
	return &CA{Cert: cert, Key: key}, nil
}

// LoadCA reads a CA from its certificate and key, PEM (the files
// CA.PEM wrote).
func LoadCA(certPEM, keyPEM []byte) (*CA, error) {
	cb, _ := pem.Decode(certPEM)
	if cb == nil || cb.Type != "CERTIFICATE" {
		return nil, errors.New("CA certificate: no PEM CERTIFICATE block")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("CA certificate: %w", err)
	}
	if !cert.IsCA {
		return nil, fmt.Errorf("certificate %s is not a CA", cert.Subject.CommonName)
	}
	kb, _ := pem.Decode(keyPEM)
	if kb == nil {
		return nil, errors.New("CA key: no PEM block")
	}
	key, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("CA key: %w", err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("CA key: a %T signs nothing", key)
	}
	return &CA{Cert: cert, Key: signer}, nil
}

// PEM is the CA's certificate and key, PEM.
func (ca *CA) PEM() (certPEM, keyPEM []byte, err error) {
	return encode(ca.Cert.Raw, ca.Key)
}

// Issue makes a certificate for cn valid for dnsNames and ips over
// validity, for servers and clients both (a NATS server routes to the
// others as a client), and its key: both PEM.
func (ca *CA) Issue(cn string, dnsNames []string, ips []net.IP, validity time.Duration) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate the key of %s: %w", cn, err)
	}
	tmpl, err := template(cn, validity)
	if err != nil {
		return nil, nil, err
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	tmpl.DNSNames, tmpl.IPAddresses = dnsNames, ips
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		return nil, nil, fmt.Errorf("create the certificate of %s: %w", cn, err)
	}
	return encode(der, key)
}

// template is a certificate named cn, valid from an hour ago (clocks
// differ) for validity, with a random serial number.
func template(cn string, validity time.Duration) (*x509.Certificate, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("serial number: %w", err)
	}
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(validity),
	}, nil
}

// encode is a certificate (DER) and its key, PEM.
func encode(der []byte, key crypto.Signer) (certPEM, keyPEM []byte, err error) {
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("marshal key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), nil
}
