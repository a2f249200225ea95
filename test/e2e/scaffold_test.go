package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestInitScaffold: the controller that `uc init` writes, the start of
// the README's five-minute controller, works as written: in every
// language, the hook passes its own test on the request.json uc wrote, with
// the command uc init prints, and a hook that answers a Secret instead of the
// ConfigMap fails it; and served by `uc worker -- python3 hook.py` the
// Python hook gives a new kind's parent its ConfigMap and status, before and
// after an edit.
func TestInitScaffold(t *testing.T) {
	for _, tc := range []struct{ language, hook string }{
		{"python", "hook.py"}, {"go", "main.go"}, {"javascript", "hook.js"}, {"shell", "hook.sh"},
	} {
		t.Run(tc.language, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "greeting")
			test := printedCommand(t, initScaffold(t, dir, "--language", tc.language), "# its test")
			if out, err := exec.CommandContext(t.Context(), "sh", "-c", test).CombinedOutput(); err != nil {
				t.Fatalf("the hook's test, %s: %v\n%s", test, err, out)
			}
			hook := filepath.Join(dir, tc.hook)
			src, err := os.ReadFile(hook)
			if err != nil {
				t.Fatal(err)
			}
			broken := bytes.Replace(src, []byte(`"ConfigMap"`), []byte(`"Secret"`), 1)
			if bytes.Equal(broken, src) {
				t.Fatalf("%s names no \"ConfigMap\" to break", hook)
			}
			if err := os.WriteFile(hook, broken, 0o644); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.CommandContext(t.Context(), "sh", "-c", test).CombinedOutput(); err == nil {
				t.Errorf("the hook's test, %s, passes a hook that answers a Secret:\n%s", test, out)
			}
		})
	}

	ctx := t.Context()
	dir := filepath.Join(t.TempDir(), "greeting")
	// The group runExecExample serves.
	initScaffold(t, dir, "--group", "examples.universalcontroller.dev")
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

// initScaffold runs uc init Greeting into dir, and returns what it printed.
func initScaffold(t *testing.T, dir string, flags ...string) string {
	t.Helper()
	out, err := exec.CommandContext(t.Context(), env.uc.bin, append([]string{"init", "Greeting", dir}, flags...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("uc init: %v\n%s", err, out)
	}
	return string(out)
}

// printedCommand is the command uc init printed on the line that ends with
// comment.
func printedCommand(t *testing.T, printed, comment string) string {
	t.Helper()
	for line := range strings.SplitSeq(printed, "\n") {
		if cmd, ok := strings.CutSuffix(line, comment); ok {
			return strings.TrimSpace(cmd)
		}
	}
	t.Fatalf("uc init printed no line ending with %q:\n%s", comment, printed)
	return ""
}
