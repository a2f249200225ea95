package testbed

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"
)

const pollInterval = 100 * time.Millisecond

// poll calls check until it returns nil. It fails when ctx ends, reporting
// check's last error, or as soon as one of the watched processes exits.
func poll(ctx context.Context, what string, check func(context.Context) error, watch ...*Process) error {
	ticker := time.NewTicker(pollInterval)
	defer ticker.Stop()
	for {
		err := check(ctx)
		if err == nil {
			return nil
		}
		for _, p := range watch {
			if exit := p.Exited(); exit != nil {
				return fmt.Errorf("waiting for %s: %w", what, exit)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w (last error: %v)", what, ctx.Err(), err)
		case <-ticker.C:
		}
	}
}

// httpCheck returns a check that GETs url and wants status 200. A non-empty
// token is sent as bearer token.
func httpCheck(client *http.Client, url, token string) func(context.Context) error {
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
		}
		return nil
	}
}

// httpClient returns a client for probes. With a CA it verifies servers
// against it; without one it accepts any certificate, which is what the
// controllers' self-signed loopback endpoints need.
func httpClient(caPEM []byte) *http.Client {
	tlsConfig := &tls.Config{InsecureSkipVerify: caPEM == nil}
	if caPEM != nil {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(caPEM)
		tlsConfig.RootCAs = pool
	}
	return &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: tlsConfig, DisableKeepAlives: true},
	}
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort() (int, error) {
	ports, err := FreePorts(1)
	if err != nil {
		return 0, err
	}
	return ports[0], nil
}

// FreePorts returns n distinct free ports on 127.0.0.1, holding all of them
// open until it has them so that none is returned twice.
func FreePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("pick a free port: %w", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// loopbackURL returns scheme://127.0.0.1:port.
func loopbackURL(scheme string, port int) string {
	return scheme + "://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}
