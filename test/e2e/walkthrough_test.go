package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"universalcontroller.dev/uc/test/testbed"
	"universalcontroller.dev/uc/test/walkthrough"
)

// TestWalkthrough: the five-minute controller of the README and of
// docs/getting-started.md works as written. The shell blocks marked to run
// are run in order, as one terminal would, in a directory where the
// walkthrough's .testbed/env points at this test bed and uc run (what
// make testbed writes); then the Greeting gets its ConfigMap and status
// from the hook the walkthrough served. Every shell block of those pages
// is marked, run or not run with a reason (the README's first, the two
// commands, CI runs itself).
func TestWalkthrough(t *testing.T) {
	gvr := schema.GroupVersionResource{Group: "hooks.example.com", Version: "v1", Resource: "greetings"}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = env.dyn.Resource(gvr).Namespace("default").Delete(ctx, "hello", metav1.DeleteOptions{})
		_, _ = deployKubectl(t, nil, "delete", "--ignore-not-found", "universalcontroller", "greeting-controller")
		_, _ = deployKubectl(t, nil, "delete", "--ignore-not-found", "crd", "greetings.hooks.example.com")
	})
	for _, page := range []string{"README.md", "docs/getting-started.md"} {
		t.Run(page, func(t *testing.T) {
			script := markedBlocks(t, page)
			walk(t, script)
			ctx := t.Context()
			eventually(t, 2*time.Minute, func() error {
				cm, err := env.kube.CoreV1().ConfigMaps("default").Get(ctx, "hello", metav1.GetOptions{})
				if err != nil {
					return err
				}
				if cm.Data["message"] != "Hello from my own hook" {
					return fmt.Errorf("ConfigMap message %q", cm.Data["message"])
				}
				greeting, err := env.dyn.Resource(gvr).Namespace("default").Get(ctx, "hello", metav1.GetOptions{})
				if err != nil {
					return err
				}
				if n, _, _ := unstructured.NestedInt64(greeting.Object, "status", "configMaps"); n != 1 {
					return fmt.Errorf("status.configMaps %d, want 1", n)
				}
				return syncedTrue(greeting)
			})
			// The next page's walkthrough starts from no Greeting.
			if err := env.dyn.Resource(gvr).Namespace("default").Delete(ctx, "hello", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			eventually(t, time.Minute, func() error {
				if _, err := env.kube.CoreV1().ConfigMaps("default").Get(ctx, "hello", metav1.GetOptions{}); err == nil {
					return fmt.Errorf("the ConfigMap hello is still there")
				}
				return nil
			})
		})
	}
}

// markedBlocks is the script of a page's shell blocks marked to run, in
// order; it fails the test on a block with no marker (but the README's
// first, the two commands, which CI runs itself).
func markedBlocks(t *testing.T, page string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(env.root, page))
	if err != nil {
		t.Fatal(err)
	}
	script, problems := walkthrough.Script(page, data, func(i int) bool { return page == "README.md" && i == 0 })
	for _, p := range problems {
		t.Error(p)
	}
	if script == "" {
		t.FailNow()
	}
	return script
}

// walk runs script with bash, as one terminal would, in a new directory
// holding uc/.testbed/env and .testbed/env for this test bed and uc run;
// what it leaves in the background is stopped when the test ends.
func walk(t *testing.T, script string) {
	t.Helper()
	dir, bin := t.TempDir(), t.TempDir()
	if err := os.Symlink(env.uc.bin, filepath.Join(bin, "uc")); err != nil { // uc on PATH, as make testbed puts it
		t.Fatal(err)
	}
	kubectl := testbed.CachedBin("kubectl")
	envFile := fmt.Sprintf("export KUBECONFIG=%s\nexport NATS_URL=%s\nexport UC_NATS_URL=%s\nexport PATH=%s:%s:$PATH\n",
		env.bed.Kubeconfig(), env.uc.natsURL, env.uc.natsURL, bin, filepath.Dir(kubectl))
	for _, d := range []string{dir, filepath.Join(dir, "uc")} {
		if err := os.MkdirAll(filepath.Join(d, ".testbed"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, ".testbed", "env"), []byte(envFile), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	logFile := filepath.Join(dir, "walkthrough.log")
	stop, err := walkthrough.Run(t.Context(), dir, script, logFile)
	t.Cleanup(stop) // uc worker &
	log, _ := os.ReadFile(logFile)
	if err != nil {
		t.Fatalf("the walkthrough: %v\n%s", err, log)
	}
	t.Logf("the walkthrough's output:\n%s", log)
}
