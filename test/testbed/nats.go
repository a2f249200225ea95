package testbed

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
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
	proc        *Process
}

// StartNATS starts nats-server on 127.0.0.1:port (a free port if port is 0)
// with JetStream storing into dir, and waits until it is healthy. Its log
// goes to dir/nats-server.log.
func StartNATS(ctx context.Context, dir string, port int) (*NATSServer, error) {
	bins, err := ensureBinaries(ctx, slogf)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create NATS dir: %w", err)
	}
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	if port == 0 {
		port = ports[1]
	}
	s := &NATSServer{bin: bins.bin("nats-server"), dir: dir, port: port, monitorPort: ports[0]}
	if err := s.start(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// start launches the process and waits for its health endpoint, which
// reports ok once JetStream is up.
func (s *NATSServer) start(ctx context.Context) error {
	p, err := StartProcess("nats-server", s.bin, filepath.Join(s.dir, "nats-server.log"),
		"--addr=127.0.0.1",
		"--port="+strconv.Itoa(s.port),
		"--http_port="+strconv.Itoa(s.monitorPort),
		"--jetstream",
		"--store_dir="+s.dir,
	)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, natsStartTimeout)
	defer cancel()
	health := httpCheck(httpClient(nil), loopbackURL("http", s.monitorPort)+"/healthz", "")
	if err := poll(ctx, "nats-server", health, p); err != nil {
		p.Kill()
		return err
	}
	s.proc = p
	return nil
}

// URL returns the client URL, nats://127.0.0.1:port.
func (s *NATSServer) URL() string { return loopbackURL("nats", s.port) }

// Stop stops the server gracefully (SIGKILL after a grace period). It is a
// no-op if the server is not running.
func (s *NATSServer) Stop() { s.proc.Stop(stopGrace) }

// Kill kills the server with SIGKILL, like a crash.
func (s *NATSServer) Kill() { s.proc.Kill() }

// Restart stops the server if it runs and starts it again on the same port
// and storage directory, waiting until it is healthy.
func (s *NATSServer) Restart(ctx context.Context) error {
	s.Stop()
	return s.start(ctx)
}
