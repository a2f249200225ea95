package main

import (
	"net/url"
	"testing"

	"github.com/nats-io/nats.go"
)

// TestEmbeddedNATSFreePort: with port 0, each embedded server takes a free
// port, not nats-server's default 4222, and says which in its ClientURL.
func TestEmbeddedNATSFreePort(t *testing.T) {
	ports := map[string]bool{}
	for range 2 {
		ns, err := startEmbeddedNATS("127.0.0.1:0", t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(ns.Shutdown)
		u, err := url.Parse(ns.ClientURL())
		if err != nil {
			t.Fatal(err)
		}
		if p := u.Port(); p == "0" || p == "4222" || ports[p] {
			t.Fatalf("embedded NATS on %s, after %v", ns.ClientURL(), ports)
		}
		ports[u.Port()] = true
		nc, err := nats.Connect(ns.ClientURL())
		if err != nil {
			t.Fatalf("connect to %s: %v", ns.ClientURL(), err)
		}
		nc.Close()
	}
}
