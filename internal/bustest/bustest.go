// Package bustest runs an embedded NATS JetStream server with uc's streams for
// unit tests.
package bustest

import (
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"universalcontroller.dev/uc/dispatcher"
)

// JetStream runs an embedded JetStream server with uc's streams (in memory)
// for one test and connects to it.
func JetStream(t *testing.T) jetstream.JetStream {
	t.Helper()
	ns := start(t, &server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true})
	return withStreams(t, connect(t, ns.ClientURL()), jetstream.MemoryStorage)
}

// Server is an embedded JetStream server storing to files, so that a test
// can restart it on them.
type Server struct {
	t    *testing.T
	opts server.Options
	ns   *server.Server
}

// RestartableJetStream runs a Server with uc's streams for one test, and
// connects to it with a client that reconnects forever.
func RestartableJetStream(t *testing.T) (*Server, jetstream.JetStream) {
	t.Helper()
	s := &Server{t: t, opts: server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true}}
	s.ns = start(t, &s.opts)
	s.opts.Port = s.ns.Addr().(*net.TCPAddr).Port
	return s, withStreams(t, connect(t, s.ns.ClientURL()), jetstream.FileStorage)
}

// Restart stops the server and starts it again on the same port and files:
// what it kept in memory is lost.
func (s *Server) Restart() {
	s.t.Helper()
	s.ns.Shutdown()
	s.ns.WaitForShutdown()
	s.ns = start(s.t, &s.opts)
}

func start(t *testing.T, opts *server.Options) *server.Server {
	t.Helper()
	ns, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	t.Cleanup(ns.Shutdown)
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("NATS did not start")
	}
	return ns
}

func connect(t *testing.T, url string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

func withStreams(t *testing.T, js jetstream.JetStream, storage jetstream.StorageType) jetstream.JetStream {
	t.Helper()
	if err := dispatcher.EnsureStreams(t.Context(), js, dispatcher.TopologyOptions{Storage: storage}); err != nil {
		t.Fatal(err)
	}
	return js
}
