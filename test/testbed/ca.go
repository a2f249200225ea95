package testbed

import (
	"net"
	"path/filepath"
	"time"

	"universalcontroller.dev/uc/internal/natstls"
)

// CA is a certificate authority that issues the test bed's certificates.
type CA struct {
	ca *natstls.CA
	// PEM is the CA certificate.
	PEM []byte
}

// validity is how long the test bed's certificates are valid.
const validity = 365 * 24 * time.Hour

// NewCA makes a CA named cn.
func NewCA(cn string) (*CA, error) {
	ca, err := natstls.NewCA(cn, validity)
	if err != nil {
		return nil, err
	}
	certPEM, _, err := ca.PEM()
	if err != nil {
		return nil, err
	}
	return &CA{ca: ca, PEM: certPEM}, nil
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
	if usage == Server {
		return ca.ca.Issue(cn, []string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1)}, validity)
	}
	return ca.ca.Issue(cn, nil, nil, validity)
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
