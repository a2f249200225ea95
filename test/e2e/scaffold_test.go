package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestInitScaffold: the controller that `uc init` writes, the start of
// the README's five-minute controller, works as written: its hook answers its
// request.json alone, and served by `uc worker -- python3 hook.py` it
// gives a new kind's parent its ConfigMap and status, before and after an
// edit.
func TestInitScaffold(t *testing.T) {
	ctx := t.Context()
	dir := filepath.Join(t.TempDir(), "greeting")
	// The group runExecExample serves.
	scaffold := exec.CommandContext(ctx, env.uc.bin, "init", "Greeting", dir, "--group", "examples.universalcontroller.dev")
	if out, err := scaffold.CombinedOutput(); err != nil {
		t.Fatalf("uc init: %v\n%s", err, out)
	}
	request, err := os.ReadFile(filepath.Join(dir, "request.json"))
	if err != nil {
		t.Fatal(err)
	}
	alone := exec.CommandContext(ctx, "python3", filepath.Join(dir, "hook.py"))
	alone.Stdin = bytes.NewReader(request)
	if out, err := alone.Output(); err != nil {
		t.Fatalf("the hook alone on request.json: %v\n%s", err, out)
	}

	// The example helpers take paths below the repository's root.
	rel, err := filepath.Rel(env.root, dir)
	if err != nil {
		t.Fatal(err)
	}
	gvr, ns := runExecExample(t, rel, "greetings", "greeting.yaml", "greeting-controller", "python3", "hook.py")
	converged := func(message string) func() error {
		return func() error {
			cm, err := env.kube.CoreV1().ConfigMaps(ns).Get(ctx, "hello", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if cm.Data["message"] != message {
				return fmt.Errorf("ConfigMap message %q, want %q", cm.Data["message"], message)
			}
			greeting, err := env.dyn.Resource(gvr).Namespace(ns).Get(ctx, "hello", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if n, _, _ := unstructured.NestedInt64(greeting.Object, "status", "configMaps"); n != 1 {
				return fmt.Errorf("status.configMaps %d, want 1", n)
			}
			return syncedTrue(greeting)
		}
	}
	eventually(t, time.Minute, converged("Hello from my own hook"))
	patchParent(t, gvr, ns, "hello", `{"spec":{"message":"Edited"}}`)
	eventually(t, time.Minute, converged("Edited"))
}
