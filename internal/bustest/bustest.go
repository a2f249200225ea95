// Package bustest runs an embedded NATS JetStream server with uc's streams for
// unit tests.
package bustest

import (
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
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	t.Cleanup(ns.Shutdown)
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("NATS did not start")
	}
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if err := dispatcher.EnsureStreams(t.Context(), js, dispatcher.TopologyOptions{Storage: jetstream.MemoryStorage}); err != nil {
		t.Fatal(err)
	}
	return js
}
