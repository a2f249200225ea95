package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"universalcontroller.dev/uc/internal/bustest"
	"universalcontroller.dev/uc/internal/registry"
	"universalcontroller.dev/uc/internal/topology"
)

// TestKubeClientTimeouts: the Kubernetes clients give up on a request after
// restTimeout; the informers' client has no such limit, so their watches
// are not cut.
func TestKubeClientTimeouts(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443"}}]
users: [{name: u, user: {}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := kubeConfig(config{kubeconfig: kubeconfig})
	if err != nil {
		t.Fatal(err)
	}
	if c.Timeout != restTimeout {
		t.Errorf("request timeout %v, want %v", c.Timeout, restTimeout)
	}
	if w := watchConfig(c); w.Timeout != 0 || c.Timeout != restTimeout {
		t.Errorf("watch timeout %v (request timeout now %v), want none (and the request timeout left as it was)", w.Timeout, c.Timeout)
	}
}

// TestReadyConsumers: /readyz fails while a consumer a role needs is
// missing, and passes once it exists.
func TestReadyConsumers(t *testing.T) {
	js := bustest.JetStream(t)
	ctx := t.Context()
	needed := topology.ApplierConsumer(3)
	var b onBus
	b.add(topology.Applier(4), func() []topology.Consumer { return []topology.Consumer{needed} })
	checks := readyChecks(js.Conn(), js, func() []*registry.Registry { return nil }, b)
	consumers := func() error {
		for _, c := range checks {
			if c.name == "consumers" {
				return c.fn(ctx)
			}
		}
		t.Fatal("no consumers check")
		return nil
	}
	if err := consumers(); err == nil || !strings.Contains(err.Error(), needed.Name()) {
		t.Fatalf("the check passed or does not name the missing consumer: %v", err)
	}
	if _, err := js.CreateOrUpdateConsumer(ctx, needed.Stream, needed.Config); err != nil {
		t.Fatal(err)
	}
	if err := consumers(); err != nil {
		t.Fatalf("the consumer exists, the check says %v", err)
	}
}
