package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/schemas/v1alpha1"
	"universalcontroller.dev/uc/sdk/go/hook"
	"universalcontroller.dev/uc/test/manifests"
	"universalcontroller.dev/uc/test/testbed"
)

// ucProcess is uc run as a separate process, with its embedded NATS server
// storing to files in dataDir, so it can be killed and started again.
type ucProcess struct {
	bin, kubeconfig, dir string
	flags                []string
	natsURL              string
	natsListen           string
	metricsAddr          string // where its /metrics is
	proc                 *testbed.Process
}

// startUC starts uc run in dir, its NATS server and its metrics on free
// ports, with debug logs and flags. A port is only known to have been free
// a moment ago: one taken meanwhile (by any connection's local port) makes
// uc exit at once, and it is started again on others.
func startUC(ctx context.Context, bin, kubeconfig, dir string, flags ...string) (*ucProcess, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	for attempt := 1; ; attempt++ {
		ports, err := testbed.FreePorts(2)
		if err != nil {
			return nil, err
		}
		u := &ucProcess{bin: bin, kubeconfig: kubeconfig, dir: dir, flags: flags,
			natsListen: fmt.Sprintf("127.0.0.1:%d", ports[0]), natsURL: fmt.Sprintf("nats://127.0.0.1:%d", ports[0]),
			metricsAddr: fmt.Sprintf("127.0.0.1:%d", ports[1])}
		err = u.start(ctx)
		if err == nil || attempt == 3 || !u.portTaken() {
			return u, err
		}
		fmt.Fprintf(os.Stderr, "uc in %s: a port was taken meanwhile, starting it on others\n", dir)
		log := filepath.Join(dir, "uc.log")
		if err := os.Rename(log, fmt.Sprintf("%s.port-taken-%d", log, attempt)); err != nil {
			return nil, err
		}
	}
}

// portTaken tells whether uc exited because one of its ports was in use.
func (u *ucProcess) portTaken() bool {
	b, err := os.ReadFile(filepath.Join(u.dir, "uc.log"))
	return err == nil && u.proc.Exited() != nil && strings.Contains(string(b), "address already in use")
}

func (u *ucProcess) start(ctx context.Context) error {
	var err error
	args := append([]string{"run", "--kubeconfig", u.kubeconfig, "--nats-listen", u.natsListen,
		"--data-dir", filepath.Join(u.dir, "data"), "--metrics-addr", u.metricsAddr, "--log-level", "debug"}, u.flags...)
	u.proc, err = testbed.StartProcess("uc", u.bin, filepath.Join(u.dir, "uc.log"), args...)
	if err != nil {
		return err
	}
	return poll(ctx, time.Minute, func() error {
		if err := u.proc.Exited(); err != nil {
			return backoffStop{err}
		}
		nc, err := nats.Connect(u.natsURL)
		if err != nil {
			return err
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			return err
		}
		_, err = js.Stream(ctx, bus.ReplyStream)
		return err
	})
}

// kill kills uc with SIGKILL, like a crash.
func (u *ucProcess) kill() { u.proc.Kill() }

func (u *ucProcess) stop() { u.proc.Stop(10 * time.Second) }

func (u *ucProcess) dumpLog() {
	b, _ := os.ReadFile(filepath.Join(u.dir, "uc.log"))
	lines := strings.Split(string(b), "\n")
	fmt.Fprintf(os.Stderr, "--- last lines of uc.log ---\n%s\n", strings.Join(lines[max(0, len(lines)-2000):], "\n"))
}

// backoffStop ends a poll at once with its error.
type backoffStop struct{ err error }

func (b backoffStop) Error() string { return b.err.Error() }

// poll calls check until it returns nil or the timeout passes.
func poll(ctx context.Context, timeout time.Duration, check func() error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		err := check()
		var stop backoffStop
		if err == nil || errors.As(err, &stop) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not within %s: %w", timeout, err)
		case <-tick.C:
		}
	}
}

// eventually fails t unless check passes within timeout.
func eventually(t *testing.T, timeout time.Duration, check func() error) {
	t.Helper()
	start := time.Now()
	if err := poll(t.Context(), timeout, check); err != nil {
		t.Fatal(err)
	}
	t.Logf("condition met after %s", time.Since(start).Round(time.Millisecond))
}

// consistently fails t if check fails at any time during d.
func consistently(t *testing.T, d time.Duration, check func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if err := check(); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			return
		}
		select {
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		case <-tick.C:
		}
	}
}

// applyFile applies every object of a YAML file with server-side apply.
func applyFile(ctx context.Context, path string) error {
	objs, err := manifests.Read(path)
	if err != nil {
		return err
	}
	mapper := newMapper()
	for _, obj := range objs {
		if err := applyObject(ctx, mapper, obj); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	return nil
}

// manifestObject is the one object of a YAML file (path below the
// repository's root).
func manifestObject(t *testing.T, path string) *unstructured.Unstructured {
	t.Helper()
	objs, err := manifests.Read(filepath.Join(env.root, path))
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 1 {
		t.Fatalf("%s has %d objects, want 1", path, len(objs))
	}
	return objs[0]
}

// newMapper maps kinds to resources by discovery; applyObject resets it
// when a kind is not (yet) known.
func newMapper() *restmapper.DeferredDiscoveryRESTMapper {
	return restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(env.kube.Discovery()))
}

func applyObject(ctx context.Context, mapper *restmapper.DeferredDiscoveryRESTMapper, obj *unstructured.Unstructured) error {
	gvk := obj.GroupVersionKind()
	return poll(ctx, 30*time.Second, func() error {
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			mapper.Reset() // a CRD just installed
			return err
		}
		res := env.dyn.Resource(m.Resource)
		var ri interface {
			Apply(context.Context, string, *unstructured.Unstructured, metav1.ApplyOptions, ...string) (*unstructured.Unstructured, error)
		} = res
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			ns := obj.GetNamespace()
			if ns == "" {
				ns = "default"
			}
			ri = res.Namespace(ns)
		}
		_, err = ri.Apply(ctx, obj.GetName(), obj, metav1.ApplyOptions{FieldManager: "e2e", Force: true})
		return err
	})
}

// gvr of the resources the tests use.
var (
	fooGVR        = schema.GroupVersionResource{Group: "samplecontroller.k8s.io", Version: "v1alpha1", Resource: "foos"}
	barGVR        = schema.GroupVersionResource{Group: "e2e.universalcontroller.dev", Version: "v1", Resource: "bars"}
	deploymentGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
)

// namespace creates a namespace for one test and deletes it afterwards.
func namespace(t *testing.T) string {
	t.Helper()
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(name) > 50 {
		name = name[:50]
	}
	extraNamespace(t, name)
	// Pods need the namespace's default ServiceAccount.
	eventually(t, 30*time.Second, func() error {
		_, err := env.kube.CoreV1().ServiceAccounts(name).Get(t.Context(), "default", metav1.GetOptions{})
		return err
	})
	return name
}

// extraNamespace creates one more namespace for a test, named name, and
// deletes it afterwards.
func extraNamespace(t *testing.T, name string) string {
	t.Helper()
	createClusterScoped(t, schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": name}}})
	return name
}

// createClusterScoped creates a cluster-scoped object of resource gvr and
// deletes it when the test ends.
func createClusterScoped(t *testing.T, gvr schema.GroupVersionResource, obj *unstructured.Unstructured) {
	t.Helper()
	res := env.dyn.Resource(gvr)
	if _, err := res.Create(t.Context(), obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	name := obj.GetName()
	t.Cleanup(func() {
		_ = res.Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

// countingHook serves the Foo example's sync hook, counts calls per parent,
// and can hold the calls of one parent until released.
type countingHook struct {
	gates
	mu          sync.Mutex
	generations map[string][]int64 // by namespace/name: the parent generation each call saw
}

func newCountingHook() *countingHook {
	return &countingHook{generations: map[string][]int64{}}
}

// seen lists the parent generation each call for key saw, in call order.
func (h *countingHook) seen(key string) []int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.generations[key])
}

// gates hold a hook's calls for chosen keys (namespace/name of the
// object a call is about) until released. The zero value holds nothing.
type gates struct {
	lock sync.Mutex
	held map[string]chan struct{}
}

// hold makes the calls for key wait until the returned release is called.
func (g *gates) hold(key string) (release func()) {
	gate := make(chan struct{})
	g.lock.Lock()
	if g.held == nil {
		g.held = map[string]chan struct{}{}
	}
	g.held[key] = gate
	g.lock.Unlock()
	return sync.OnceFunc(func() {
		g.lock.Lock()
		delete(g.held, key)
		g.lock.Unlock()
		close(gate)
	})
}

// wait returns once the calls for key are not held, or with ctx's error
// when it ends first.
func (g *gates) wait(ctx context.Context, key string) error {
	g.lock.Lock()
	gate := g.held[key]
	g.lock.Unlock()
	if gate == nil {
		return nil
	}
	select {
	case <-gate:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// serveHooks serves the handlers as the controller's hooks, in this
// process, until the test ends.
func serveHooks(t *testing.T, controller string, handlers ...hook.Handler) {
	t.Helper()
	ctx := t.Context()
	for _, h := range handlers {
		go func() {
			if err := hook.Serve(ctx, env.js, controller, h); err != nil && ctx.Err() == nil {
				t.Errorf("%s %s worker: %v", controller, h.Hook(), err)
			}
		}()
	}
}

// installCRD applies a CRD manifest and waits until its resource is served.
func installCRD(t *testing.T, path string, gvr schema.GroupVersionResource) {
	t.Helper()
	if err := applyFile(t.Context(), filepath.Join(env.root, path)); err != nil {
		t.Fatal(err)
	}
	if err := poll(t.Context(), 30*time.Second, func() error {
		_, err := env.dyn.Resource(gvr).List(t.Context(), metav1.ListOptions{Limit: 1})
		return err
	}); err != nil {
		t.Fatalf("%s is not served: %v", gvr, err)
	}
}

// registerManifest applies the objects of a manifest, each changed by edit
// first, and deletes the UniversalControllers and UniversalDecorators among
// them when the test ends.
func registerManifest(t *testing.T, path string, edit func(*unstructured.Unstructured)) {
	t.Helper()
	objs, err := manifests.Read(filepath.Join(env.root, path))
	if err != nil {
		t.Fatal(err)
	}
	mapper := newMapper()
	for _, obj := range objs {
		if edit != nil {
			edit(obj)
		}
		if err := applyObject(t.Context(), mapper, obj); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		registered := map[string]schema.GroupVersionResource{"UniversalController": v1alpha1.Resource, "UniversalDecorator": v1alpha1.DecoratorResource}
		if gvr, ok := registered[obj.GetKind()]; ok {
			name := obj.GetName()
			t.Cleanup(func() {
				_ = env.dyn.Resource(gvr).Delete(context.Background(), name, metav1.DeleteOptions{})
			})
		}
	}
}

// runExample installs an example, serving its sync hook in this process,
// logs its size, and returns a new namespace for its parents.
func runExample(t *testing.T, title, dir string, gvr schema.GroupVersionResource, controller string, sync hook.SyncFunc) string {
	t.Helper()
	logHookSize(t, title, dir)
	installExample(t, dir, gvr, controller, nil, newRecorder().handler(hooks.Sync, typed(sync)))
	return namespace(t)
}

// installExample installs an example's CRD (dir/crd.yaml), serves the
// handlers as its controller's hooks in this process, and registers its
// controller (dir/controller.yaml), each object changed by edit first (nil:
// none).
func installExample(t *testing.T, dir string, gvr schema.GroupVersionResource, controller string, edit func(*unstructured.Unstructured), handlers ...hook.Handler) {
	t.Helper()
	installCRD(t, dir+"/crd.yaml", gvr)
	serveHooks(t, controller, handlers...)
	registerManifest(t, dir+"/controller.yaml", edit)
}

// logHookSize logs the size of an example's hook (its Go files but the
// tests, cmd included) and of its controller.yaml next to the thesis'
// figures: lines that are not blank, and of those the ones that are not
// comments.
func logHookSize(t *testing.T, example, dir string) {
	t.Helper()
	var goLines, goCode int
	err := filepath.WalkDir(filepath.Join(env.root, dir), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		lines, code, err := countLines(path, "//")
		goLines, goCode = goLines+lines, goCode+code
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	yamlLines, yamlCode, err := countLines(filepath.Join(env.root, dir, "controller.yaml"), "#")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: hook %d lines of Go (%d without comments), controller.yaml %d lines (%d without comments); "+
		"the thesis: sample-controller 58 lines, tf-operator about 400", example, goLines, goCode, yamlLines, yamlCode)
}

// countLines counts a file's lines that are not blank, and of those the
// ones that do not start with the comment marker.
func countLines(path, comment string) (lines, code int, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, err
	}
	s := bufio.NewScanner(bytes.NewReader(b))
	for s.Scan() {
		line := strings.TrimSpace(s.Text())
		if line == "" {
			continue
		}
		lines++
		if !strings.HasPrefix(line, comment) {
			code++
		}
	}
	return lines, code, s.Err()
}

// changeRecord records every version of the objects of one resource in a
// namespace, from its start until the test ends, in the order of the watch.
type changeRecord struct {
	mu      sync.Mutex
	changes []change
}

// change is one watch event: the object, or its last state when deleted.
type change struct {
	deleted bool
	obj     *unstructured.Unstructured
}

// resourceVersion is the change's position in etcd's history, comparable
// across the resources of the one etcd of the test bed.
func (c change) resourceVersion() uint64 {
	rv, _ := strconv.ParseUint(c.obj.GetResourceVersion(), 10, 64)
	return rv
}

// recordChanges starts recording the changes of a resource in a namespace;
// the watch resumes where it stopped if the apiserver closes it.
func recordChanges(t *testing.T, gvr schema.GroupVersionResource, ns string) *changeRecord {
	t.Helper()
	ctx := t.Context()
	res := env.dyn.Resource(gvr).Namespace(ns)
	list, err := res.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rec := &changeRecord{}
	for i := range list.Items {
		rec.changes = append(rec.changes, change{obj: &list.Items[i]})
	}
	w, err := watchtools.NewRetryWatcherWithContext(ctx, list.GetResourceVersion(), &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return res.Watch(ctx, opts)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	go func() {
		for ev := range w.ResultChan() {
			obj, ok := ev.Object.(*unstructured.Unstructured)
			if !ok || ev.Type == watch.Bookmark {
				continue
			}
			rec.mu.Lock()
			rec.changes = append(rec.changes, change{deleted: ev.Type == watch.Deleted, obj: obj})
			rec.mu.Unlock()
		}
	}()
	return rec
}

func (r *changeRecord) all() []change {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.changes)
}

// conditions lists the distinct "type=status" conditions the object was
// seen with, in the order first seen.
func (r *changeRecord) conditions(name string) []string {
	var seen []string
	for _, c := range r.all() {
		if c.obj.GetName() != name {
			continue
		}
		conds, _, _ := unstructured.NestedSlice(c.obj.Object, "status", "conditions")
		for _, cond := range conds {
			m, _ := cond.(map[string]any)
			if s := fmt.Sprintf("%v=%v", m["type"], m["status"]); !slices.Contains(seen, s) {
				seen = append(seen, s)
			}
		}
	}
	return seen
}

// jetStreamAs connects to NATS as a worker would, named name, until the test
// ends.
func jetStreamAs(t *testing.T, c bus.Connection, name string) jetstream.JetStream {
	t.Helper()
	nc, err := c.Connect(name, slog.Default(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// cm is a desired ConfigMap child, as a hook returns it.
func cm(name string, labels map[string]any, data map[string]any) map[string]any {
	meta := map[string]any{"name": name}
	if labels != nil {
		meta["labels"] = labels
	}
	obj := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta}
	if data != nil {
		obj["data"] = data
	}
	return obj
}

// getConfigMap gets a ConfigMap.
func getConfigMap(ctx context.Context, ns, name string) (*corev1.ConfigMap, error) {
	return env.kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
}

// controlledBy checks obj's controller is the object of that UID.
func controlledBy(obj metav1.Object, uid types.UID) error {
	if ref := metav1.GetControllerOf(obj); ref == nil || ref.UID != uid {
		return fmt.Errorf("%s is controlled by %v, want %s", obj.GetName(), ref, uid)
	}
	return nil
}

// gone checks an object no longer exists.
func gone(err error, what string) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err == nil {
		return fmt.Errorf("%s still exists", what)
	}
	return err
}
