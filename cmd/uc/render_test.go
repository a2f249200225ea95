package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"universalcontroller.dev/uc/internal/render"
)

// repoRoot is the repository's root, from this package's directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// renderExample runs uc render on an example's controllers (its
// controller.yaml, or decorators.yaml), its CRD if it has one and a parent
// (a file of the example, or an absolute path) with the hook command or
// URL and more in args, and returns its result.
func renderExample(t *testing.T, dir, parent string, args ...string) *render.Result {
	t.Helper()
	dir = filepath.Join(repoRoot(t), dir)
	if !filepath.IsAbs(parent) {
		parent = filepath.Join(dir, parent)
	}
	args = append([]string{"render", "-o", "json", "--parent", parent}, args...)
	for flag, file := range map[string]string{"--controller": "controller.yaml", "--crd": "crd.yaml"} {
		if _, err := os.Stat(filepath.Join(dir, file)); err == nil {
			args = append(args, flag, filepath.Join(dir, file))
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "decorators.yaml")); err == nil {
		args = append(args, "--controller", filepath.Join(dir, "decorators.yaml"))
	}
	out := runUC(t, args...)
	if out.code != 0 {
		t.Fatalf("uc render exited %d:\n%s", out.code, out.stderr)
	}
	var r render.Result
	if err := json.Unmarshal([]byte(out.stdout), &r); err != nil {
		t.Fatalf("not a result: %v\n%s", err, out.stdout)
	}
	return &r
}

// TestRenderExamples renders every example whose hook runs on this
// machine — the Go workers as built binaries (exec hooks through
// UC_EXEC_HOOK), the Python and shell workers, the Python webhook, the
// JavaScript CatSet's sync function — with the example's own parent (the
// ConfigMapPropagation of its e2e test, with its source as a related
// object), and checks that the desired children are those the example's
// e2e test waits for; service-per-pod's decorators with the StatefulSet
// and one of its Pods. Not here: finalize-cleanup, whose hook keeps its
// registry in a NATS bucket.
func TestRenderExamples(t *testing.T) {
	root := repoRoot(t)
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", bin+"/",
		"./examples/foo/cmd/...", "./examples/fanout/cmd/...", "./examples/bluegreen/cmd/...", "./examples/catset/cmd/...",
		"./examples/cluster-parent/cmd/...", "./examples/tfjob/cmd/...", "./examples/update-strategies/cmd/...",
		"./examples/configmap-propagation/cmd/...", "./examples/service-per-pod/cmd/...")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the example hooks: %v\n%s", err, out)
	}
	hook := func(name string) []string { return []string{"--exec", filepath.Join(bin, name)} }
	webhook := startPythonWebhook(t, filepath.Join(root, "examples/python-webhook/sync.py"))
	jsSync := fmt.Sprintf(`node --input-type=module -e 'import {sync} from %q; let d = ""; for await (const c of process.stdin) d += c; process.stdout.write(JSON.stringify(sync(JSON.parse(d))))'`,
		filepath.Join(root, "examples/js-catset/catset.js"))
	// The e2e test's ConfigMapPropagation, and its source among others;
	// a Pod of the StatefulSet service-per-pod decorates.
	propagation, source, pod := filepath.Join(bin, "propagation.yaml"), filepath.Join(bin, "source.yaml"), filepath.Join(bin, "pod.yaml")
	writeFiles(t, map[string]string{
		pod: `{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "nginx-1", "annotations": {"pod-name-label": "pod-name"}},
			"spec": {"containers": [{"name": "nginx", "image": "nginx"}]}}`,
		propagation: `{"apiVersion": "examples.universalcontroller.dev/v1", "kind": "ConfigMapPropagation", "metadata": {"name": "settings"},
			"spec": {"sourceName": "settings", "sourceNamespace": "src", "targetNamespaces": ["a", "b"]}}`,
		source: `{"apiVersion": "v1", "kind": "List", "items": [
			{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings", "namespace": "src"}, "data": {"level": "1"}},
			{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings", "namespace": "elsewhere"}, "data": {"level": "0"}}]}`,
	})
	for _, tc := range []struct {
		dir, parent string
		args        []string
		// plan is the plan; fields the value of fields of desired
		// children ("Kind namespace/name" → "path.to.field" → value).
		plan   string
		fields map[string]map[string]any
		// parentFields are fields of the parent as the reply sets them.
		parentFields map[string]any
	}{
		{dir: "examples/foo", parent: "foo.yaml", args: hook("foo-hook"),
			plan:   "create Deployment.apps/v1 default/example-foo",
			fields: map[string]map[string]any{"Deployment default/example-foo": {"spec.replicas": 2}}},
		{dir: "examples/fanout", parent: "fanout.yaml", args: hook("fanout-hook"),
			plan:   "create ConfigMap.v1 default/example-fanout-0, create ConfigMap.v1 default/example-fanout-1, create ConfigMap.v1 default/example-fanout-2",
			fields: map[string]map[string]any{"ConfigMap default/example-fanout-2": {"data.payload": "hello"}}},
		{dir: "examples/bluegreen", parent: "bluegreen.yaml", args: hook("bluegreen-hook"),
			plan:   "create ReplicaSet.apps/v1 default/web-blue, create ReplicaSet.apps/v1 default/web-green",
			fields: map[string]map[string]any{"ReplicaSet default/web-blue": {"spec.replicas": 3}, "ReplicaSet default/web-green": {"spec.replicas": 0}}},
		{dir: "examples/catset", parent: "catset.yaml", args: hook("catset-hook"),
			plan:   "create PersistentVolumeClaim.v1 default/www-nginx-0, create Pod.v1 default/nginx-0",
			fields: map[string]map[string]any{"Pod default/nginx-0": {"spec.hostname": "nginx-0", "spec.subdomain": "nginx"}}},
		{dir: "examples/cluster-parent", parent: "clusterconfig.yaml", args: hook("cluster-parent-hook"),
			plan:   "create ConfigMap.v1 default/greeting, create ConfigMap.v1 kube-public/greeting",
			fields: map[string]map[string]any{"ConfigMap kube-public/greeting": {"data.greeting": "hello"}}},
		{dir: "examples/tfjob", parent: "tfjob.yaml", args: hook("tfjob-hook"),
			plan: "create Service.v1 default/mnist-ps-0, create Pod.v1 default/mnist-ps-0, create Service.v1 default/mnist-worker-0, create Pod.v1 default/mnist-worker-0, " +
				"create Service.v1 default/mnist-worker-1, create Pod.v1 default/mnist-worker-1",
			fields: map[string]map[string]any{"Pod default/mnist-worker-1": {"spec.restartPolicy": "Never"}}},
		{dir: "examples/update-strategies", parent: "strategydemo.yaml", args: hook("update-strategies-hook"),
			plan: "create ConfigMap.v1 default/demo-ondelete, create Secret.v1 default/demo-recreate, create Service.v1 default/demo-inplace",
			fields: map[string]map[string]any{"ConfigMap default/demo-ondelete": {"data.message": "hello"},
				"Service default/demo-inplace": {"metadata.annotations.examples\\.universalcontroller\\.dev/message": "hello"}}},
		{dir: "examples/configmap-propagation", parent: propagation, args: append(hook("configmap-propagation-hook"), "--related", source),
			plan:   "create ConfigMap.v1 a/settings, create ConfigMap.v1 b/settings",
			fields: map[string]map[string]any{"ConfigMap a/settings": {"data.level": "1"}, "ConfigMap b/settings": {"data.level": "1"}}},
		{dir: "examples/service-per-pod", parent: "statefulset.yaml", args: hook("service-per-pod-hook"),
			plan: "create Service.v1 default/nginx-0, create Service.v1 default/nginx-1, create Service.v1 default/nginx-2",
			fields: map[string]map[string]any{"Service default/nginx-2": {"spec.selector.pod-name": "nginx-2",
				"metadata.annotations.universalcontroller\\.dev/decorator": "service-per-pod"}}},
		{dir: "examples/service-per-pod", parent: pod, args: hook("pod-name-label-hook"),
			parentFields: map[string]any{"metadata.labels.pod-name": "nginx-1"}},
		{dir: "examples/python-worker", parent: "website.yaml", args: []string{"--exec", "python3 " + filepath.Join(root, "examples/python-worker/hook.py")},
			plan: "create ConfigMap.v1 default/hello, create Deployment.apps/v1 default/hello",
			fields: map[string]map[string]any{"ConfigMap default/hello": {"data.index\\.html": "<h1>Hello from a Python hook</h1>\n"},
				"Deployment default/hello": {"spec.replicas": 2}}},
		{dir: "examples/shell-worker", parent: "configset.yaml", args: []string{"--exec", "sh " + filepath.Join(root, "examples/shell-worker/hook.sh")},
			plan: "create ConfigMap.v1 default/shop-database, create ConfigMap.v1 default/shop-frontend",
			fields: map[string]map[string]any{"ConfigMap default/shop-frontend": {"data.color": "blue", "data.title": "The Shop"},
				"ConfigMap default/shop-database": {"data.host": "db.shop.svc", "data.port": "5432"}}},
		{dir: "examples/python-webhook", parent: "greeting.yaml", args: []string{"--url", webhook},
			plan:   "create ConfigMap.v1 default/hello-0, create ConfigMap.v1 default/hello-1",
			fields: map[string]map[string]any{"ConfigMap default/hello-1": {"data.greeting": "Hello, uc!"}}},
		{dir: "examples/js-catset", parent: "catset.yaml", args: []string{"--exec", jsSync},
			plan:   "create Pod.v1 default/nginx-0",
			fields: map[string]map[string]any{"Pod default/nginx-0": {"spec.hostname": "nginx-0"}}},
	} {
		t.Run(filepath.Base(tc.dir), func(t *testing.T) {
			r := renderExample(t, tc.dir, tc.parent, tc.args...)
			var steps []string
			for _, s := range r.Plan {
				steps = append(steps, fmt.Sprintf("%s %s %s/%s", s.Action, s.Kind, s.Namespace, s.Name))
			}
			if got := strings.Join(steps, ", "); got != tc.plan {
				t.Errorf("plan:\n%s\nwant:\n%s", got, tc.plan)
			}
			for child, fields := range tc.fields {
				i := slices.IndexFunc(r.Children, func(c *unstructured.Unstructured) bool {
					return c.GetKind()+" "+c.GetNamespace()+"/"+c.GetName() == child
				})
				if i < 0 {
					t.Errorf("no desired %s", child)
					continue
				}
				checkFields(t, child, r.Children[i], fields)
			}
			checkFields(t, "the parent", r.Parent, tc.parentFields)
		})
	}
}

// checkFields checks fields of an object ("path.to.field" → value).
func checkFields(t *testing.T, what string, o *unstructured.Unstructured, fields map[string]any) {
	t.Helper()
	for path, want := range fields {
		got, _, _ := unstructured.NestedFieldNoCopy(o.Object, fieldPath(path)...)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s %s = %v, want %v", what, path, got, want)
		}
	}
}

func writeFiles(t *testing.T, files map[string]string) {
	t.Helper()
	for path, content := range files {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// fieldPath splits a dotted path; "\." is a dot within a field's name.
func fieldPath(path string) []string {
	parts := strings.Split(strings.ReplaceAll(path, `\.`, "\x00"), ".")
	for i, p := range parts {
		parts[i] = strings.ReplaceAll(p, "\x00", ".")
	}
	return parts
}

// startPythonWebhook runs a Python webhook example on a free port until
// the test ends, and returns its sync URL.
func startPythonWebhook(t *testing.T, script string) string {
	t.Helper()
	cmd := exec.Command("python3", script, "0")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	port := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		port <- strings.TrimSpace(strings.TrimPrefix(line, "listening on"))
	}()
	select {
	case p := <-port:
		return "http://127.0.0.1:" + p + "/sync"
	case <-time.After(30 * time.Second):
		t.Fatal("the webhook did not say where it listens")
		return ""
	}
}

// TestRenderExitCodes: uc render exits 0 with a result, 1 with the
// parent's Synced message when the hook fails or its reply would be
// rejected, 2 on a wrong command line or input.
func TestRenderExitCodes(t *testing.T) {
	root := repoRoot(t)
	example := []string{"render",
		"--controller", filepath.Join(root, "examples/shell-worker/controller.yaml"),
		"--crd", filepath.Join(root, "examples/shell-worker/crd.yaml"),
		"--parent", filepath.Join(root, "examples/shell-worker/configset.yaml")}
	decorated := []string{"render", "--controller", filepath.Join(root, "examples/service-per-pod/decorators.yaml"),
		"--parent", filepath.Join(root, "examples/service-per-pod/statefulset.yaml")}
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"a reply", []string{"--exec", "sh " + filepath.Join(root, "examples/shell-worker/hook.sh")}, 0, ""},
		{"garbage", []string{"--exec", "echo hello"}, 1,
			"uc render: the parent would get Synced=False, InvalidHookReply: sync hook reply rejected: not a valid sync response: "},
		{"exit 1", []string{"--exec", "echo oops >&2; exit 1"}, 1,
			`uc render: the parent would get Synced=False, HookFailed: sync hook failed, will retry: WorkerError: sh -c echo oops >&2; exit 1: exit status 1: stderr: "oops"`},
		{"a kind not declared", []string{"--exec", `echo '{"children": [{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}}]}'`}, 1,
			`uc render: the parent would get Synced=False, InvalidHookReply: sync hook reply rejected: children[0] Secret.v1 "s": kind not declared in childResources`},
		{"a hang", []string{"--exec", "sleep 30", "--timeout", "200ms"}, 1,
			"uc render: the parent would get Synced=False, HookFailed: sync hook failed, will retry: Timeout: no reply within 200ms"},
		{"a decorator's reply", append(decorated, "--exec", `echo '{"status": null, "labels": {"Bad Label": "x"}}'`), 1,
			`uc render: the object would get a Warning Event InvalidHookReply: sync hook reply rejected: labels["Bad Label"]: `},
		{"no command", nil, 2, "uc: configset-controller's sync hook is not a webhook: give the command that serves it (--exec) or its URL (--url)"},
		{"both", []string{"--exec", "true", "--url", "http://127.0.0.1:1"}, 2, "uc: --exec and --url: give one"},
		{"files and a cluster", []string{"--exec", "true", "--kubeconfig", "k", "--observed", "o"}, 2, "uc: --kubeconfig reads the observed and related objects from the cluster"},
		{"a hook render does not know", []string{"--exec", "true", "--hook", "render"}, 2, `uc: --hook "render": sync, finalize or customize`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if len(args) == 0 || args[0] != "render" {
				args = append(slices.Clone(example), args...)
			}
			out := runUC(t, args...)
			if out.code != tc.code || !strings.Contains(out.stderr, tc.stderr) {
				t.Errorf("exit %d, want %d; stderr:\n%s\nwant it to say:\n%s", out.code, tc.code, out.stderr, tc.stderr)
			}
		})
	}
}
