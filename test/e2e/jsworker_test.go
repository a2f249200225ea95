package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"universalcontroller.dev/uc/internal/natsauth"
	"universalcontroller.dev/uc/schemas/v1alpha1"
	"universalcontroller.dev/uc/sdk/go/hook"
)

var catsetGVR = schema.GroupVersionResource{Group: "examples.universalcontroller.dev", Version: "v1", Resource: "catsets"}

// lockedBuffer collects a process's output.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// needNode fails t unless Node.js and npm are installed.
func needNode(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is needed for the JavaScript worker tests (apt-get install -y nodejs npm): %v", tool, err)
		}
	}
}

// npm runs npm in dir, failing t with its output.
func npm(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "npm", args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm %v: %v\n%s", args, err, out)
	}
}

// catsetPods checks that the CatSet has exactly the Pods <name>-0 … <name>-(n-1),
// all Ready, and says so in its status.
func catsetPods(ctx context.Context, ns, name string, n int) error {
	pods, err := env.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	ready := map[string]bool{}
	for _, p := range pods.Items {
		for _, c := range p.Status.Conditions {
			ready[p.Name] = ready[p.Name] || c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
		}
		ready[p.Name] = ready[p.Name] && p.DeletionTimestamp == nil
	}
	for i := range n {
		if pod := fmt.Sprintf("%s-%d", name, i); !ready[pod] {
			return fmt.Errorf("pod %s is not there and Ready (pods: %v)", pod, ready)
		}
	}
	if len(pods.Items) != n {
		return fmt.Errorf("%d pods, want %d: %v", len(pods.Items), n, ready)
	}
	cs, err := env.dyn.Resource(catsetGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	replicas, _, _ := unstructured.NestedInt64(cs.Object, "status", "replicas")
	readyReplicas, _, _ := unstructured.NestedInt64(cs.Object, "status", "readyReplicas")
	if replicas != int64(n) || readyReplicas != int64(n) {
		return fmt.Errorf("catset status: replicas %d, readyReplicas %d, want %d", replicas, readyReplicas, n)
	}
	return syncedTrue(cs)
}

// startNodeWorker runs `node script` in dir against uc run's NATS, with
// the variables vars, until the test ends, and returns its standard
// output; its standard error, the worker's log, is shown when the test
// fails.
func startNodeWorker(t *testing.T, dir, script string, vars ...string) *lockedBuffer {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "node", script)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "NATS_URL="+env.uc.natsURL), vars...)
	var stdout, stderr lockedBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Wait() // the test's context kills it
		if t.Failed() {
			t.Logf("node %s %v:\n%s", script, vars, stderr.String())
		}
	})
	return &stdout
}

// TestJSWorkerCatSet: the CatSet hook, written in JavaScript and served
// with the JavaScript SDK (sdk/js, installed from the repository as an npm
// package), serves a controller on the bus (examples/js-catset): a
// CatSet's Pods come up in order and go on scale-down.
func TestJSWorkerCatSet(t *testing.T) {
	needNode(t)
	ctx := t.Context()
	dir := filepath.Join(env.root, "examples/js-catset")
	npm(t, dir, "ci", "--no-audit", "--no-fund")
	npm(t, dir, "test")
	startNodeWorker(t, dir, "worker.js")

	for _, f := range []string{"crd.yaml", "controller.yaml"} {
		registerManifest(t, "examples/js-catset/"+f, nil)
	}
	ns := namespace(t)
	catset := manifestObject(t, "examples/js-catset/catset.yaml")
	catset.SetNamespace(ns)
	eventually(t, 30*time.Second, func() error { // the CRD may not be served yet
		_, err := env.dyn.Resource(catsetGVR).Namespace(ns).Create(ctx, catset, metav1.CreateOptions{})
		return err
	})
	eventually(t, 2*time.Minute, func() error { return catsetPods(ctx, ns, "nginx", 3) })

	if _, err := env.dyn.Resource(catsetGVR).Namespace(ns).Patch(ctx, "nginx", types.MergePatchType, []byte(`{"spec":{"replicas":1}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, func() error { return catsetPods(ctx, ns, "nginx", 1) })
}

// jsEchoCalls are the calls of parent that the JavaScript Echo hook
// (testdata/js-echo-worker.mjs) wrote on its output.
func jsEchoCalls(t *testing.T, out *lockedBuffer, parent string) []echoCall {
	t.Helper()
	var calls []echoCall
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var c struct {
			Name, Mode, ResourceVersion string
			At                          time.Time
		}
		if err := json.Unmarshal([]byte(line), &c); err != nil {
			t.Fatalf("the JavaScript Echo hook wrote %q: %v", line, err)
		}
		if c.Name == parent {
			calls = append(calls, echoCall{c.At, c.Mode, c.ResourceVersion})
		}
	}
	return calls
}

// TestJSWorkerDelivery: the JavaScript SDK keeps the Go SDK's delivery
// promises on uc's bus. A hook that throws, or hangs past the timeout, is
// tried maxDeliveries (3) times with a growing backoff, then its request is
// dead-lettered and the parent says why (Synced=False/HookFailed and a
// Warning Event); a later good reply clears it. A hook's 429 holds its
// parent back for the Retry-After. A failure is reported on the parent at
// the first failed call, long before the dead letter. The SDK's unit tests
// run first.
func TestJSWorkerDelivery(t *testing.T) {
	needNode(t)
	sdk := filepath.Join(env.root, "sdk/js")
	npm(t, sdk, "ci", "--no-audit", "--no-fund")
	npm(t, sdk, "test")
	script := filepath.Join(env.root, "test/e2e/testdata/js-echo-worker.mjs")
	const controller, atOnce = "js-delivery", "js-at-once"
	registerEchoController(t, controller, v1alpha1.Hook{Delivery: fastDelivery(2 * time.Second)})
	ten := int32(10)
	registerEchoController(t, atOnce, v1alpha1.Hook{Delivery: &v1alpha1.Delivery{
		MaxDeliveries: &ten, BackoffDelay: &metav1.Duration{Duration: 20 * time.Second}}})
	out := startNodeWorker(t, sdk, script, "CONTROLLER="+controller)
	startNodeWorker(t, sdk, script, "CONTROLLER="+atOnce)
	ns := namespace(t)

	for _, tc := range []struct{ mode, reason, want string }{
		{"fail", hook.ReasonWorkerError, "will retry: WorkerError: the echo hook broke"},
		{"hang", hook.ReasonTimeout, "will retry: Timeout: no reply within 2s"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			ctx := t.Context()
			name := "js-" + tc.mode
			echo := createEcho(t, ns, name, controller, "v1", "")
			eventually(t, time.Minute, func() error { return echoSynced(ctx, ns, name, "js", "v1") })

			setEcho(t, ns, name, "v2", tc.mode)
			eventually(t, time.Minute, func() error { return hookFailed(ctx, ns, name, tc.want) })
			eventually(t, 10*time.Second, func() error { return deadLettered(ctx, controller, echo, tc.reason) })
			checkRetries(t, jsEchoCalls(t, out, name), tc.mode)

			setEcho(t, ns, name, "v3", "")
			eventually(t, time.Minute, func() error { return echoSynced(ctx, ns, name, "js", "v3") })
		})
	}

	t.Run("429", func(t *testing.T) {
		createEcho(t, ns, "js-busy", controller, "hi", "busy")
		eventually(t, time.Minute, func() error { return echoSynced(t.Context(), ns, "js-busy", "js", "hi") })
		calls := jsEchoCalls(t, out, "js-busy")
		if len(calls) < 2 {
			t.Fatalf("%d calls, want a 429 and a success", len(calls))
		}
		gap := calls[1].at.Sub(calls[0].at)
		t.Logf("the call after the 429 came %s later", gap.Round(time.Millisecond))
		if gap < 2*time.Second {
			t.Fatalf("the call after a 429 with Retry-After 2s came %s later", gap)
		}
	})

	t.Run("ReportedAtOnce", func(t *testing.T) {
		ctx := t.Context()
		createEcho(t, ns, "js-flaky", atOnce, "v1", "")
		eventually(t, time.Minute, func() error { return echoSynced(ctx, ns, "js-flaky", "js", "v1") })
		setEcho(t, ns, "js-flaky", "v2", "fail")
		// The first retry comes 10s or more after the first call: a report
		// within 8s can only be the first call's.
		eventually(t, 8*time.Second, func() error {
			return hookFailed(ctx, ns, "js-flaky", "sync hook failed, will retry: WorkerError: the echo hook broke")
		})
		setEcho(t, ns, "js-flaky", "v3", "")
		eventually(t, time.Minute, func() error { return echoSynced(ctx, ns, "js-flaky", "js", "v3") })
	})
}

// TestJSWorkerLeastPrivilege: the JavaScript SDK serves the Widget
// controller's hook as the controller's own NATS user of `uc nats-config`
// (--nats-user, --nats-password) over TLS with a client certificate
// (--nats-tls-*), beside uc's roles each on its own user: the Widgets
// converge and the server refused none of its operations. A JavaScript
// worker of the Widget controller that logs in as the Foo controller's
// user stops with exit status 1, naming the refusal.
func TestJSWorkerLeastPrivilege(t *testing.T) {
	needNode(t)
	npm(t, filepath.Join(env.root, "sdk/js"), "ci", "--no-audit", "--no-fund")
	const widgets, foos = "widget-controller", "foo-controller"
	nb := startNATSAuth(t, widgets, foos)
	installCRD(t, "test/e2e/testdata/widget-crd.yaml", widgetGVR)
	tls := []string{"--nats-tls-ca", nb.tls.CA, "--nats-tls-cert", nb.tls.ClientCert, "--nats-tls-key", nb.tls.ClientKey}
	b := &rolesOnBus{t: t, ns: namespace(t), dir: t.TempDir(), args: append([]string{
		"--kubeconfig", env.bed.Kubeconfig(), "--nats-url", nb.srv.URL(), "--log-level", "debug"}, tls...)}
	for _, role := range natsauth.Roles {
		b.start(role, role, nb.roleFlags(role)...)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(env.root, "test/e2e/testdata/js-widget-worker.mjs")
	as := func(user string) []string {
		return append([]string{script, "--nats-url", nb.srv.URL(), "--nats-user", user, "--nats-password", nb.passwords[user]}, tls...)
	}
	b.startBinary("js-worker", node, as(natsauth.HookUser(widgets))...)

	names := []string{"w1", "w2"}
	for _, n := range names {
		b.createWidget(n, "1")
	}
	eventually(t, 2*time.Minute, b.converged("1", names...))
	b.setWidget("w1", "2")
	eventually(t, time.Minute, b.converged("2", "w1"))
	log, err := os.ReadFile(filepath.Join(nb.srv.Dir(), "nats-server.log"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(log), "\n") {
		if strings.Contains(line, "Violation") {
			t.Errorf("the server refused an operation: %s", line)
		}
	}

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	intruder := exec.CommandContext(ctx, node, as(natsauth.HookUser(foos))...)
	out, err := intruder.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || ctx.Err() != nil ||
		!strings.Contains(string(out), "may not serve controller "+widgets+": permissions violation") {
		t.Fatalf("a JavaScript worker of %s as %s: %v, want exit status 1 naming the refusal:\n%s", widgets, natsauth.HookUser(foos), err, out)
	}
	t.Logf("a JavaScript worker of %s as %s stopped: %s", widgets, natsauth.HookUser(foos), lastLine(string(out)))
}

// lastLine is the last line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
