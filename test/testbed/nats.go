package testbed

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// natsStartTimeout bounds how long StartNATS and Restart wait for the
// server to become healthy.
const natsStartTimeout = time.Minute

// NATSServer is a nats-server process with JetStream file storage. Since it
// runs as its own process, tests can Kill it like a crash and Restart it on
// the same port and storage directory. Its methods must not be called
// concurrently.
type NATSServer struct {
	bin         string
	dir         string
	port        int
	monitorPort int
	cluster     []string // for a cluster member: its name, cluster port, and routes
	config      string   // the configuration file, if any
	proc        *Process
}

// NATSOptions configure a server started by StartNATSWith.
type NATSOptions struct {
	// Port is the client port on 127.0.0.1; a free one if 0.
	Port int
	// Config is nats-server configuration, such as accounts and users; the
	// test bed's flags (addresses, JetStream, storage) take precedence.
	Config string
	// TLS, if set, makes the server take only TLS clients with a client
	// certificate signed by TLS.CA.
	TLS *TLSFiles
}

// StartNATS starts nats-server on 127.0.0.1:port (a free port if port is 0)
// with JetStream storing into dir, and waits until it is healthy. Its log
// goes to dir/nats-server.log.
func StartNATS(ctx context.Context, dir string, port int) (*NATSServer, error) {
	return StartNATSWith(ctx, dir, NATSOptions{Port: port})
}

// StartNATSWith is StartNATS with a configuration: its file is
// dir/nats.conf.
func StartNATSWith(ctx context.Context, dir string, opts NATSOptions) (*NATSServer, error) {
	bins, err := ensureBinaries(ctx, slogf)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create NATS dir: %w", err)
	}
	ports, err := FreePorts(2)
	if err != nil {
		return nil, err
	}
	if opts.Port == 0 {
		opts.Port = ports[1]
	}
	s := &NATSServer{bin: bins.bin("nats-server"), dir: dir, port: opts.Port, monitorPort: ports[0]}
	if conf := opts.Config + tlsBlock(opts.TLS); conf != "" {
		s.config = filepath.Join(dir, "nats.conf")
		if err := os.WriteFile(s.config, []byte(conf), 0o600); err != nil {
			return nil, fmt.Errorf("write nats.conf: %w", err)
		}
	}
	if err := s.start(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// start launches the process and waits for its health endpoint, which
// reports ok once JetStream is up.
func (s *NATSServer) start(ctx context.Context) error {
	if err := s.launch(); err != nil {
		return err
	}
	return s.wait(ctx)
}

func (s *NATSServer) launch() error {
	args := []string{
		"--addr=127.0.0.1",
		"--port=" + strconv.Itoa(s.port),
		"--http_port=" + strconv.Itoa(s.monitorPort),
		"--jetstream",
		"--store_dir=" + s.dir,
	}
	if s.config != "" {
		args = append(args, "--config="+s.config)
	}
	p, err := StartProcess("nats-server", s.bin, filepath.Join(s.dir, "nats-server.log"), append(args, s.cluster...)...)
	if err != nil {
		return err
	}
	s.proc = p
	return nil
}

func (s *NATSServer) wait(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, natsStartTimeout)
	defer cancel()
	health := httpCheck(httpClient(nil), loopbackURL("http", s.monitorPort)+"/healthz", "")
	if err := poll(ctx, "nats-server", health, s.proc); err != nil {
		s.proc.Kill()
		return err
	}
	return nil
}

// tlsBlock is the configuration of a server that takes only TLS clients
// with a certificate signed by the CA.
func tlsBlock(f *TLSFiles) string {
	if f == nil {
		return ""
	}
	return fmt.Sprintf("\ntls {\n  cert_file: %q\n  key_file: %q\n  ca_file: %q\n  verify: true\n}\n", f.Cert, f.Key, f.CA)
}

// Dir is the server's directory: its storage, configuration and log
// (nats-server.log).
func (s *NATSServer) Dir() string { return s.dir }

// URL returns the client URL, nats://127.0.0.1:port.
func (s *NATSServer) URL() string { return loopbackURL("nats", s.port) }

// Stop stops the server gracefully (SIGKILL after a grace period). It is a
// no-op if the server is not running.
func (s *NATSServer) Stop() { s.proc.Stop(stopGrace) }

// Kill kills the server with SIGKILL, like a crash.
func (s *NATSServer) Kill() { s.proc.Kill() }

// Freeze stops the server with SIGSTOP: its clients stay connected to a
// server that answers nothing until Thaw.
func (s *NATSServer) Freeze() { s.proc.Freeze() }

// Thaw resumes a frozen server with SIGCONT.
func (s *NATSServer) Thaw() { s.proc.Thaw() }

// Restart stops the server if it runs and starts it again on the same port
// and storage directory, waiting until it is healthy.
func (s *NATSServer) Restart(ctx context.Context) error {
	s.Stop()
	return s.start(ctx)
}

// NATSCluster is a JetStream cluster of nats-server processes on loopback,
// with file storage, for tests that kill nodes.
type NATSCluster struct {
	Servers []*NATSServer
}

// StartNATSCluster starts n clustered nats-server processes storing into
// dir/n<i>, and waits until every one is healthy.
func StartNATSCluster(ctx context.Context, dir string, n int) (*NATSCluster, error) {
	bins, err := ensureBinaries(ctx, slogf)
	if err != nil {
		return nil, err
	}
	ports, err := FreePorts(3 * n)
	if err != nil {
		return nil, err
	}
	routes := make([]string, n)
	for i := range n {
		routes[i] = loopbackURL("nats", ports[3*i+2])
	}
	c := &NATSCluster{}
	for i := range n {
		s := &NATSServer{bin: bins.bin("nats-server"), dir: filepath.Join(dir, fmt.Sprintf("n%d", i)),
			port: ports[3*i], monitorPort: ports[3*i+1]}
		s.cluster = []string{
			fmt.Sprintf("--server_name=n%d", i),
			"--cluster_name=uc",
			"--cluster=" + routes[i],
			"--routes=" + strings.Join(routes, ","),
		}
		if err := os.MkdirAll(s.dir, 0o755); err != nil {
			return nil, err
		}
		c.Servers = append(c.Servers, s)
	}
	return c, c.start(ctx)
}

func (c *NATSCluster) start(ctx context.Context) error {
	for _, s := range c.Servers {
		if err := s.launch(); err != nil {
			c.Stop()
			return err
		}
	}
	for _, s := range c.Servers {
		if err := s.wait(ctx); err != nil {
			c.Stop()
			return err
		}
	}
	return nil
}

// URL returns every member's client URL, comma-separated, as NATS clients
// take them.
func (c *NATSCluster) URL() string {
	urls := make([]string, len(c.Servers))
	for i, s := range c.Servers {
		urls[i] = s.URL()
	}
	return strings.Join(urls, ",")
}

// Stop stops every member.
func (c *NATSCluster) Stop() {
	for _, s := range c.Servers {
		if s.proc != nil {
			s.Stop()
		}
	}
}

// Restart stops the whole cluster and starts it again on the same ports and
// storage.
func (c *NATSCluster) Restart(ctx context.Context) error {
	c.Stop()
	return c.start(ctx)
}
