package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"universalcontroller.dev/uc/internal/natstls"
)

// natsCerts says what uc nats-certs makes.
type natsCerts struct {
	dir                                         string
	namespace, service, headless, clusterDomain string
	validity, caValidity                        time.Duration
	ips                                         []string
}

func natsCertsCommand() *cobra.Command {
	n := natsCerts{}
	c := &cobra.Command{
		Use:   "nats-certs",
		Short: "Write a CA and the NATS servers' certificate, for an install without cert-manager",
		Long: `Writes into --dir the TLS files of the NATS servers of deploy/ (or of the
Helm chart's, with --service and --headless): ca.crt and ca.key, a CA, and
tls.crt and tls.key, the certificate every server presents to clients
(port 4222) and to the other servers (routes, 6222, mutual TLS), valid for
the client Service and every server under the headless Service, short and
qualified names. ca.crt, tls.crt and tls.key make the Secret uc-nats-tls
the servers mount; keep ca.key out of the cluster.

Run it again to renew the certificate: a CA found in --dir (ca.crt and
ca.key) signs the new one, so clients keep trusting it. Delete ca.crt and
ca.key to make a new CA. The servers and uc's roles read the files again
when the Secret changes: no restart (docs/operating.md).`,
		Example: `  # the certificates of deploy/, into the Secret uc-nats-tls
  uc nats-certs --dir nats-tls
  kubectl -n uc-system create secret generic uc-nats-tls --from-file=nats-tls/ca.crt \
    --from-file=nats-tls/tls.crt --from-file=nats-tls/tls.key --dry-run=client -o yaml | kubectl apply -f -

  # renew the certificate a year later, with the same CA: the same commands`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return n.write(cmd.OutOrStdout())
		},
	}
	f := c.Flags()
	f.StringVar(&n.dir, "dir", ".", "the directory of ca.crt, ca.key, tls.crt and tls.key")
	f.StringVar(&n.namespace, "namespace", "uc-system", "the NATS servers' namespace")
	f.StringVar(&n.service, "service", "nats", "the NATS client Service")
	f.StringVar(&n.headless, "headless", "nats-headless", "the NATS servers' headless Service (the StatefulSet's serviceName)")
	f.StringVar(&n.clusterDomain, "cluster-domain", "cluster.local", "the cluster's DNS domain")
	f.DurationVar(&n.validity, "validity", 365*24*time.Hour, "how long the servers' certificate is valid")
	f.DurationVar(&n.caValidity, "ca-validity", 10*365*24*time.Hour, "how long a new CA is valid")
	f.StringArrayVar(&n.ips, "ip", nil, "an IP address the certificate is valid for too (repeatable)")
	return c
}

// write writes the files, with the CA of dir if it holds one.
func (n natsCerts) write(out io.Writer) error {
	var ips []net.IP
	for _, s := range n.ips {
		ip := net.ParseIP(s)
		if ip == nil {
			return fmt.Errorf("--ip %q: not an IP address", s)
		}
		ips = append(ips, ip)
	}
	if err := os.MkdirAll(n.dir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", n.dir, err)
	}
	caCrt, caKey := filepath.Join(n.dir, "ca.crt"), filepath.Join(n.dir, "ca.key")
	ca, made, err := n.ca(caCrt, caKey)
	if err != nil {
		return err
	}
	files := map[string][]byte{}
	if made {
		if files[caCrt], files[caKey], err = ca.PEM(); err != nil {
			return err
		}
	}
	names := natstls.DNSNames(n.service, n.headless, n.namespace, n.clusterDomain)
	cert, key, err := ca.Issue(n.service+"."+n.namespace, names, ips, n.validity)
	if err != nil {
		return err
	}
	files[filepath.Join(n.dir, "tls.crt")], files[filepath.Join(n.dir, "tls.key")] = cert, key
	for _, name := range []string{caCrt, caKey, filepath.Join(n.dir, "tls.crt"), filepath.Join(n.dir, "tls.key")} {
		b, ok := files[name]
		if !ok {
			continue
		}
		if err := os.WriteFile(name, b, 0o600); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
		fmt.Fprintf(out, "wrote %s\n", name)
	}
	return nil
}

// ca is the CA of caCrt and caKey, or a new one (made) if neither exists.
func (n natsCerts) ca(caCrt, caKey string) (ca *natstls.CA, made bool, err error) {
	certPEM, certErr := os.ReadFile(caCrt)
	keyPEM, keyErr := os.ReadFile(caKey)
	switch {
	case errors.Is(certErr, fs.ErrNotExist) && errors.Is(keyErr, fs.ErrNotExist):
		ca, err = natstls.NewCA("uc-nats-ca", n.caValidity)
		return ca, true, err
	case certErr != nil:
		return nil, false, fmt.Errorf("read the CA: %w", certErr)
	case keyErr != nil:
		return nil, false, fmt.Errorf("read the CA's key: %w", keyErr)
	}
	ca, err = natstls.LoadCA(certPEM, keyPEM)
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w", n.dir, err)
	}
	return ca, false, nil
}
