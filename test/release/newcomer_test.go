package release

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	ucrelease "universalcontroller.dev/uc/internal/release"
	"universalcontroller.dev/uc/test/testbed"
	"universalcontroller.dev/uc/test/walkthrough"
)

// TestNewcomer is the newcomer's path, scripted and timed: from a fresh
// clone of this commit and uc as the release ships it (this machine's
// platform, built as make release builds it, or -dist's), the README's
// steps and nothing else. Terminal 1: its make testbed block, with UC_BIN
// naming the released uc, until the test bed and uc run are ready.
// Terminal 2: its blocks marked to run (uc init, the hook's own test, the
// kind and its controller, uc worker, a parent), as TestWalkthrough runs
// them against its own uc; then the new kind's parent gets its ConfigMap
// and status from the hook uc init wrote.
func TestNewcomer(t *testing.T) {
	src, err := ucrelease.Describe(t.Context(), repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	var stages []string
	begin, last := time.Now(), time.Now()
	stage := func(what string) {
		stages = append(stages, fmt.Sprintf("%-52s %6s", what, time.Since(last).Round(100*time.Millisecond)))
		last = time.Now()
	}
	defer func() {
		t.Logf("the newcomer's path, %s in all:\n%s", time.Since(begin).Round(time.Second), strings.Join(stages, "\n"))
	}()

	here := ucrelease.Platform{OS: runtime.GOOS, Arch: runtime.GOARCH}
	dir := *dist
	if dir == "" {
		dir = t.TempDir()
		if _, err := ucrelease.Build(t.Context(), ucrelease.Options{Root: repoRoot, Out: dir, Platforms: []ucrelease.Platform{here}}); err != nil {
			t.Fatal(err)
		}
		stage("make release, for " + here.String())
	}
	uc := filepath.Join(dir, ucrelease.Names{Version: src.Version}.Binary(here))

	clone := filepath.Join(t.TempDir(), "uc")
	if out, err := exec.CommandContext(t.Context(), "git", "clone", "--quiet", repoRoot, clone).CombinedOutput(); err != nil {
		t.Fatalf("git clone: %v\n%s", err, out)
	}
	stage("git clone")
	readme, err := os.ReadFile(filepath.Join(clone, "README.md"))
	if err != nil {
		t.Fatal(err)
	}

	// Terminal 1, until Ctrl-C: the test bed and the released uc run.
	var up string
	for _, b := range walkthrough.Blocks(readme) {
		if strings.HasPrefix(strings.TrimSpace(b.Script), "make testbed") {
			up = b.Script
		}
	}
	if up == "" {
		t.Fatal("README.md has no block that runs make testbed")
	}
	log := filepath.Join(t.TempDir(), "terminal-1.log")
	terminal1, err := testbed.StartProcess("make testbed", "bash", log, "-c",
		fmt.Sprintf("cd %q && export UC_BIN=%q && %s", clone, uc, up))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { terminal1.Stop(time.Minute) }) // Ctrl-C: make testbed tears it all down
	err = wait.PollUntilContextTimeout(t.Context(), time.Second, 15*time.Minute, true, func(context.Context) (bool, error) {
		if err := terminal1.Exited(); err != nil {
			return false, err
		}
		out, err := os.ReadFile(log)
		return strings.Contains(string(out), "==> ready"), err
	})
	if err != nil {
		out, _ := os.ReadFile(log)
		t.Fatalf("make testbed with the released uc: %v\n%s", err, out)
	}
	stage("make testbed with UC_BIN, until ready")

	// Terminal 2: the five-minute controller.
	script, problems := walkthrough.Script("README.md", readme, func(i int) bool { return i == 0 })
	for _, p := range problems {
		t.Error(p)
	}
	terminal2 := filepath.Join(t.TempDir(), "terminal-2.log")
	stop, err := walkthrough.Run(t.Context(), clone, script, terminal2)
	t.Cleanup(stop) // uc worker &
	if err != nil {
		log, _ := os.ReadFile(terminal2)
		t.Fatalf("the README's terminal 2: %v\n%s", err, log)
	}
	stage("the README's terminal 2 (uc init … kubectl apply)")

	// What the README says the hook does, on the newcomer's test bed.
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(clone, ".testbed", "testbed", "kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	kube, dyn := kubernetes.NewForConfigOrDie(cfg), dynamic.NewForConfigOrDie(cfg)
	greetings := schema.GroupVersionResource{Group: "hooks.example.com", Version: "v1", Resource: "greetings"}
	var state string
	err = wait.PollUntilContextTimeout(t.Context(), time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		cm, err := kube.CoreV1().ConfigMaps("default").Get(ctx, "hello", metav1.GetOptions{})
		if err != nil {
			state = err.Error()
			return false, nil
		}
		g, err := dyn.Resource(greetings).Namespace("default").Get(ctx, "hello", metav1.GetOptions{})
		if err != nil {
			state = err.Error()
			return false, nil
		}
		n, _, _ := unstructured.NestedInt64(g.Object, "status", "configMaps")
		state = fmt.Sprintf("ConfigMap message %q, status.configMaps %d", cm.Data["message"], n)
		return cm.Data["message"] == "Hello from my own hook" && n == 1, nil
	})
	if err != nil {
		t.Fatalf("the Greeting hello, reconciled by the released uc: %v (%s)", err, state)
	}
	stage("the Greeting reconciled")
	// And it was the released uc that ran, not one make built.
	ucLog, err := os.ReadFile(filepath.Join(clone, ".testbed", "uc.log"))
	if err != nil {
		t.Fatal(err)
	}
	if started := "uc started\" version=" + src.Version + " "; !strings.Contains(string(ucLog), started) {
		t.Errorf("uc run's log does not say %q: not the released uc\n%s", started, ucLog)
	}
}
