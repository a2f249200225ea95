package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"universalcontroller.dev/uc/schemas/v1alpha1"
	"universalcontroller.dev/uc/test/testbed"
)

// startExecWorker runs `uc worker --controller controller -- command…` as
// its own process, against uc run's NATS, until the test ends; its log is
// shown when the test fails.
func startExecWorker(t *testing.T, controller string, command ...string) *testbed.Process {
	t.Helper()
	return startExecWorkerOn(t, env.uc.natsURL, controller, command...)
}

// startExecWorkerOn is startExecWorker against the NATS at natsURL.
func startExecWorkerOn(t *testing.T, natsURL, controller string, command ...string) *testbed.Process {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), "worker.log")
	args := append([]string{"worker", "--controller", controller, "--nats-url", natsURL, "--log-level", "debug", "--"}, command...)
	p, err := testbed.StartProcess("uc worker", env.uc.bin, logPath, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Stop(10 * time.Second)
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("uc worker's log:\n%s", b)
		}
	})
	return p
}

// createManifest creates the object of an example's manifest in ns.
func createManifest(t *testing.T, path string, gvr schema.GroupVersionResource, ns string) {
	t.Helper()
	obj := manifestObject(t, path)
	obj.SetNamespace(ns)
	if _, err := env.dyn.Resource(gvr).Namespace(ns).Create(t.Context(), obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// patchParent merge-patches a parent.
func patchParent(t *testing.T, gvr schema.GroupVersionResource, ns, name, patch string) {
	t.Helper()
	if _, err := env.dyn.Resource(gvr).Namespace(ns).Patch(t.Context(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// runExecExample installs the example in dir — its crd.yaml for resource,
// its controller.yaml — serves the controller's sync hook with `uc worker
// -- interpreter dir/hook`, and creates its sample parent in a new
// namespace. It returns the parents' resource and the namespace.
func runExecExample(t *testing.T, dir, resource, sample, controller, interpreter, hook string) (schema.GroupVersionResource, string) {
	t.Helper()
	gvr := schema.GroupVersionResource{Group: "examples.universalcontroller.dev", Version: "v1", Resource: resource}
	installCRD(t, dir+"/crd.yaml", gvr)
	registerManifest(t, dir+"/controller.yaml", nil)
	startExecWorker(t, controller, interpreter, filepath.Join(env.root, dir, hook))
	ns := namespace(t)
	createManifest(t, dir+"/"+sample, gvr, ns)
	return gvr, ns
}

// TestExamplePythonWorker: examples/python-worker, a Python hook of a few
// lines on the standard library, served by `uc worker -- python3 hook.py`:
// a Website's page and Deployment follow its spec, its status counts the
// ready Pods and its Available condition says they all are, before and
// after an edit, whose change of replicas the hook tells in a Scaling
// Event.
func TestExamplePythonWorker(t *testing.T) {
	ctx := t.Context()
	gvr, ns := runExecExample(t, "examples/python-worker", "websites", "website.yaml", "website-controller", "python3", "hook.py")
	converged := func(message string, replicas int64) func() error {
		return func() error {
			cm, err := env.kube.CoreV1().ConfigMaps(ns).Get(ctx, "hello", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if want := "<h1>" + message + "</h1>\n"; cm.Data["index.html"] != want {
				return fmt.Errorf("page %q, want %q", cm.Data["index.html"], want)
			}
			d, err := env.kube.AppsV1().Deployments(ns).Get(ctx, "hello", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if d.Spec.Replicas == nil || int64(*d.Spec.Replicas) != replicas {
				return fmt.Errorf("deployment replicas %v, want %d", d.Spec.Replicas, replicas)
			}
			site, err := env.dyn.Resource(gvr).Namespace(ns).Get(ctx, "hello", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if ready, _, _ := unstructured.NestedInt64(site.Object, "status", "readyReplicas"); ready != replicas {
				return fmt.Errorf("status.readyReplicas %d, want %d", ready, replicas)
			}
			if c := condition(site, "Available"); c == nil || c["status"] != "True" || c["message"] != fmt.Sprintf("%d of %d Pods ready", replicas, replicas) {
				return fmt.Errorf("Available condition %v, want True", c)
			}
			return syncedTrue(site)
		}
	}
	eventually(t, 2*time.Minute, converged("Hello from a Python hook", 2))
	patchParent(t, gvr, ns, "hello", `{"spec":{"message":"Edited","replicas":3}}`)
	eventually(t, 2*time.Minute, converged("Edited", 3))
	eventually(t, 30*time.Second, func() error {
		events, err := hookEvents(ctx, ns, "hello", "Scaling")
		if err != nil || len(events) != 1 || events[0].Message != "from 2 to 3 Pods" {
			return fmt.Errorf("the hook's Scaling Events: %v (%v), want one, from 2 to 3 Pods", events, err)
		}
		return nil
	})
}

// TestExampleShellWorker: examples/shell-worker, a jq program in a shell
// script, served by `uc worker -- sh hook.sh`: a ConfigSet's ConfigMaps
// follow its spec, before and after an edit that changes one and drops
// another.
func TestExampleShellWorker(t *testing.T) {
	if _, err := exec.LookPath("jq"); err != nil {
		t.Fatalf("jq is needed for the shell worker example (apt-get install -y jq): %v", err)
	}
	ctx := t.Context()
	gvr, ns := runExecExample(t, "examples/shell-worker", "configsets", "configset.yaml", "configset-controller", "sh", "hook.sh")
	converged := func(want map[string]map[string]string) func() error {
		return func() error {
			list, err := env.kube.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			got := map[string]map[string]string{}
			for _, cm := range list.Items {
				if name, ok := strings.CutPrefix(cm.Name, "shop-"); ok && cm.DeletionTimestamp == nil {
					got[name] = cm.Data
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				return fmt.Errorf("ConfigMaps %v, want %v", got, want)
			}
			set, err := env.dyn.Resource(gvr).Namespace(ns).Get(ctx, "shop", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if n, _, _ := unstructured.NestedInt64(set.Object, "status", "configMaps"); n != int64(len(want)) {
				return fmt.Errorf("status.configMaps %d, want %d", n, len(want))
			}
			return syncedTrue(set)
		}
	}
	eventually(t, time.Minute, converged(map[string]map[string]string{
		"frontend": {"color": "blue", "title": "The Shop"},
		"database": {"host": "db.shop.svc", "port": "5432"},
	}))
	patchParent(t, gvr, ns, "shop", `{"spec":{"configMaps":{"frontend":{"color":"red"},"database":null}}}`)
	eventually(t, time.Minute, converged(map[string]map[string]string{"frontend": {"color": "red", "title": "The Shop"}}))
}

// TestExecWorkerBadCommands: a command that prints garbage, exits 1, hangs
// (with a process it started) or writes 100 MB to its standard output
// ends, each time, in a Warning Event and a Synced=False condition on the
// parent that say what went wrong; the worker stays up and serves the
// parent again, and leaves no process behind.
func TestExecWorkerBadCommands(t *testing.T) {
	ctx := t.Context()
	const controller = "exec-bad"
	registerEchoController(t, controller, v1alpha1.Hook{Delivery: fastDelivery(2 * time.Second)})
	pids := t.TempDir() // where the hanging command writes the pid of the process it started
	command := []string{"python3", filepath.Join(env.root, "test/e2e/testdata/bad-exec-hook.py"), pids}
	w := startExecWorker(t, controller, command...)
	hook := strings.Join(command, " ") // how failures name it
	ns := namespace(t)
	const name = "victim"
	createEcho(t, ns, name, controller, "v0", "")
	eventually(t, time.Minute, func() error { return echoSynced(ctx, ns, name, "exec", "v0") })

	for i, tc := range []struct{ mode, reason, want string }{
		{"garbage", "InvalidHookReply", "not a valid sync response"},
		{"exit1", "HookFailed", "will retry: WorkerError: " + hook + `: exit status 1: stderr: "the hook broke"`},
		{"hang", "HookFailed", "will retry: Timeout: no reply within 2s"},
		{"flood", "HookFailed", "will retry: InvalidReply: " + hook + ": reply larger than 8388608 bytes: killed"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			setEcho(t, ns, name, "bad", tc.mode)
			eventually(t, time.Minute, func() error { return syncFailed(ctx, echoGVR, ns, name, tc.reason, tc.want) })
			// The worker is up, and serves the parent again.
			if err := w.Exited(); err != nil {
				t.Fatal(err)
			}
			message := fmt.Sprintf("v%d", i+1)
			setEcho(t, ns, name, message, "")
			eventually(t, time.Minute, func() error { return echoSynced(ctx, ns, name, "exec", message) })
		})
	}

	// Every run was waited for, and the processes the hanging ones started
	// were killed with them.
	eventually(t, 10*time.Second, func() error {
		children, err := testbed.Children(w.PID())
		if err == nil && len(children) > 0 {
			err = fmt.Errorf("uc worker's child processes are left: %v", children)
		}
		return err
	})
	started, err := os.ReadDir(pids)
	if err != nil || len(started) == 0 {
		t.Fatalf("the hanging command recorded no process it started (%v)", err)
	}
	for _, f := range started {
		pid, err := strconv.Atoi(f.Name())
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, 10*time.Second, func() error {
			if testbed.Alive(pid) {
				return fmt.Errorf("process %d, started by a hanging command, is alive", pid)
			}
			return nil
		})
	}
	t.Logf("%d hanging runs, and the processes they started, killed", len(started))
}
