// Package bustest runs an embedded NATS JetStream server with uc's streams for
// unit tests.
package bustest

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/util/wait"

	"universalcontroller.dev/uc/internal/topology"
)

// JetStream runs an embedded JetStream server with uc's streams (in memory)
// for one test and connects to it.
func JetStream(t testing.TB) jetstream.JetStream {
	t.Helper()
	ns := Start(t, &server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true})
	return withStreams(t, Connect(t, ns.ClientURL()), jetstream.MemoryStorage)
}

// Server is an embedded JetStream server storing to files, so that a test
// can restart it on them.
type Server struct {
	t    testing.TB
	opts server.Options
	ns   *server.Server
	nc   *nats.Conn // the test's client
}

// RestartableJetStream runs a Server with uc's streams for one test, and
// connects to it with a client that reconnects forever.
func RestartableJetStream(t testing.TB) (*Server, jetstream.JetStream) {
	t.Helper()
	s := &Server{t: t, opts: server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true}}
	s.ns = Start(t, &s.opts)
	s.opts.Port = s.ns.Addr().(*net.TCPAddr).Port
	js := withStreams(t, Connect(t, s.ns.ClientURL()), jetstream.FileStorage)
	s.nc = js.Conn()
	return s, js
}

// Restart stops the server and starts it again on the same port and files
// (what it kept in memory is lost), and waits until the test's client has
// connected again.
func (s *Server) Restart() {
	s.t.Helper()
	reconnects := s.nc.Stats().Reconnects
	s.ns.Shutdown()
	s.ns.WaitForShutdown()
	s.ns = Start(s.t, &s.opts)
	err := wait.PollUntilContextTimeout(s.t.Context(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return s.nc.Stats().Reconnects > reconnects && s.nc.IsConnected(), nil
	})
	if err != nil {
		s.t.Fatal("the client did not connect again to the restarted server")
	}
}

// Start runs an embedded NATS server for one test.
func Start(t testing.TB, opts *server.Options) *server.Server {
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

// Connect connects to url for one test, with opts, reconnecting forever.
func Connect(t testing.TB, url string, opts ...nats.Option) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(url, append(opts, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))...)
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

func withStreams(t testing.TB, js jetstream.JetStream, storage jetstream.StorageType) jetstream.JetStream {
	t.Helper()
	if err := topology.EnsureStreams(t.Context(), js, topology.Streams, topology.Options{Storage: storage}); err != nil {
		t.Fatal(err)
	}
	return js
}
