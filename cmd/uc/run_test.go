package main

import (
	"os"
	"path/filepath"
	"testing"
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
