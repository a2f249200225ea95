package e2e

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/release"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"universalcontroller.dev/uc/examples/foo"
	"universalcontroller.dev/uc/internal/natsauth"
	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/v1alpha1"
	"universalcontroller.dev/uc/sdk/go/hook"
	"universalcontroller.dev/uc/test/manifests"
	"universalcontroller.dev/uc/test/testbed"
)

// previousRelease is the release TestUpgrade upgrades from: its tag, and
// its commit, by which a clone of main finds it whether or not it fetched
// the tag. Cutting a release makes it the previous one (docs/releasing.md).
var previousRelease = struct{ tag, commit string }{"v0.1.0", "e2be4b327a5b8d2af6c9ce6609ab0c8ec4748ff1"}

const (
	// upgradeRelease is TestUpgrade's Helm release, in its own namespace;
	// its objects are named uc-upgrade-… (the chart's fullname).
	upgradeRelease = "uc-upgrade"
	// upgradeUC is the UniversalController it runs, for Gadgets, labelled
	// for this installation alone (testdata/upgrade-gadget-controller.yaml).
	upgradeUC = "upgrade-gadget-controller"
	// upgradeGadgets is how many Gadgets run through the upgrade.
	upgradeGadgets = 12
)

// TestUpgrade upgrades a running installation as a user would: the
// previous release's chart, installed with helm install and running that
// release's uc, reconciles Gadgets; helm upgrade to this commit's chart
// (the documented steps: the users' NATS configuration made again by the
// new `uc nats-config`), then every role's Deployment rolled to this
// commit's uc one replica at a time, a new Pod ready before an old one
// stops, and the NATS servers one at a time, while the Gadgets keep
// changing. Every change made before,
// during and after the roll reaches its child, no child is re-created
// (the same UIDs throughout), the Secrets the chart made (NATS passwords,
// route password, certificate) are kept, and the new watchers lead.
//
// As on the test bed everywhere, the Pods are local processes
// (deployStartRole, manifests.StartNATSServers), and the CRDs are this
// commit's throughout: Helm never upgrades a chart's crds/, and the e2e
// suite installs them first.
func TestUpgrade(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	previous := buildPreviousRelease(t, filepath.Join(dir, "previous"))
	deployStartAggregator(t)

	// The Gadget controller's kinds, and its RBAC as the previous uc rbac
	// makes it for this release's dispatcher.
	if err := applyFile(ctx, filepath.Join(env.root, "test/e2e/testdata/deploy-gadget-crd.yaml")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, func() error {
		_, err := env.dyn.Resource(deployGadgetGVR).List(ctx, metav1.ListOptions{Limit: 1})
		return err
	})
	controllerFile := filepath.Join(env.root, "test/e2e/testdata/upgrade-gadget-controller.yaml")
	rbac, err := exec.CommandContext(ctx, previous.bin, "rbac",
		"--dispatcher-service-account", upgradeRelease+":"+upgradeRelease+"-dispatcher",
		filepath.Join(env.root, "test/e2e/testdata/deploy-gadget-crd.yaml"), controllerFile).Output()
	if err != nil {
		t.Fatalf("uc rbac of %s: %v", previousRelease.tag, err)
	}
	t.Cleanup(func() { _, _ = deployKubectl(t, rbac, "delete", "--ignore-not-found", "-f", "-") })
	if _, err := deployKubectl(t, rbac, "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}

	helm := helmActions(t, upgradeRelease)
	ch, err := loader.Load(previous.chart)
	if err != nil {
		t.Fatal(err)
	}
	install := action.NewInstall(helm)
	install.ReleaseName, install.Namespace, install.CreateNamespace = upgradeRelease, upgradeRelease, true
	rel, err := install.RunWithContext(ctx, ch, upgradeValues(t, previous.bin))
	if err != nil {
		t.Fatalf("helm install of %s's chart: %v", previousRelease.tag, err)
	}
	t.Cleanup(func() {
		if _, err := action.NewUninstall(helm).Run(upgradeRelease); err != nil {
			t.Logf("helm uninstall: %v", err)
		}
	})
	installed, err := manifests.Decode([]byte(rel.Manifest))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("helm installed %s's chart %s: %d objects", previousRelease.tag, rel.Chart.Metadata.Version, len(installed))

	// The release's NATS servers, with a certificate valid on loopback
	// in place of the chart's (the Pods run there).
	sts := manifests.Typed[appsv1.StatefulSet](t, installed, "StatefulSet", upgradeRelease+"-nats")
	objs := manifests.WithNATSTLS(t, installed, sts)
	servers := manifests.StartNATSServers(t, objs, sts, filepath.Join(dir, "nats"))
	var urls []string
	for _, s := range servers {
		urls = append(urls, s.URL())
	}
	natsURL := strings.Join(urls, ",")
	scraper := scraperToken(t, upgradeRelease, upgradeRelease+"-metrics-reader")
	old := upgradeStartRoles(t, previous.bin, objs, filepath.Join(dir, "previous-pods"), natsURL, scraper, "")
	upgradeAwaitReady(t, old)

	// The Gadgets' hook worker, as the hook user of the chart's
	// nats.auth.extraUsers, its password from the Secret the chart made.
	user := natsauth.HookUser(upgradeUC)
	password := upgradeHookPassword(t, installed, user)
	js := jetStreamAs(t, bus.Connection{URL: natsURL, User: user, Password: password,
		TLSCA: filepath.Join(dir, "nats", upgradeRelease+"-nats-0", "tls", "ca.crt"), InboxPrefix: bus.HookInbox(upgradeUC)}, "gadget-worker")
	runHookWorker(t, js, upgradeUC, hook.Sync(upgradeSync))
	t.Cleanup(func() {
		_ = env.dyn.Resource(v1alpha1.Resource).Delete(context.Background(), upgradeUC, metav1.DeleteOptions{})
	})
	if err := applyFile(ctx, controllerFile); err != nil {
		t.Fatal(err)
	}

	ns := namespace(t)
	gadgets := newGadgetWriter(ns)
	for i := range upgradeGadgets {
		gadgets.create(t, fmt.Sprintf("g%d", i))
	}
	if !t.Run("the previous release reconciles the Gadgets", func(t *testing.T) {
		eventually(t, 2*time.Minute, func() error { return gadgets.converged(ctx, old) })
	}) {
		return
	}
	children := gadgets.childUIDs(t)

	// Changes all through the upgrade: one Gadget scaled every 100 ms.
	changing, stopChanges := context.WithCancel(ctx)
	var changes sync.WaitGroup
	changes.Go(func() { gadgets.keepChanging(changing, t) })

	rel, err = upgradeTo(t, helm, upgradeValues(t, env.uc.bin))
	if err != nil {
		stopChanges()
		changes.Wait()
		t.Fatalf("helm upgrade to this commit's chart: %v", err)
	}
	upgraded, err := manifests.Decode([]byte(rel.Manifest))
	if err != nil {
		t.Fatal(err)
	}
	t.Run("the chart's Secrets are kept", func(t *testing.T) {
		for _, s := range installed.OfKind("Secret") {
			before := manifests.Typed[corev1.Secret](t, installed, "Secret", s.GetName())
			after := manifests.Typed[corev1.Secret](t, upgraded, "Secret", s.GetName())
			for k, v := range before.Data {
				if !bytes.Equal(after.Data[k], v) {
					t.Errorf("helm upgrade changed %s of Secret %s", k, s.GetName())
				}
			}
		}
	})

	// The roll, of every Deployment and the NATS StatefulSet at once as
	// their controllers do it: each Deployment one replica at a time, a
	// new Pod ready before an old one stops (maxSurge 1, maxUnavailable
	// 0); the NATS servers from the last to the first, each ready (its
	// streams caught up) before the next stops.
	newObjs := manifests.Objects{Set: upgraded, Secrets: objs.Secrets, TLS: objs.TLS}
	current := map[string][]*testbed.Container{}
	var mu sync.Mutex
	var roll sync.WaitGroup
	roll.Go(func() {
		sts := manifests.Typed[appsv1.StatefulSet](t, newObjs.Set, "StatefulSet", upgradeRelease+"-nats")
		for i, s := range slices.Backward(servers) {
			s.Roll(t, newObjs, sts, i, gracePeriod(sts.Spec.Template.Spec))
			t.Logf("rolled NATS server %s", s.Pod.Name)
		}
	})
	for _, role := range manifests.Roles {
		roll.Go(func() {
			d := manifests.Typed[appsv1.Deployment](t, newObjs.Set, "Deployment", upgradeRelease+"-"+role)
			grace := gracePeriod(d.Spec.Template.Spec)
			for i, p := range old[role] {
				c := upgradeStartRole(t, env.uc.bin, newObjs, d, role, int32(i), filepath.Join(dir, "pods"), natsURL, scraper, "-next")
				if err := poll(ctx, time.Minute, func() error {
					if err := c.Check(); err != nil {
						return backoffStop{err}
					}
					return c.Ready(ctx)
				}); err != nil {
					t.Errorf("%s did not get ready: %v", c.Name(), err)
					return
				}
				p.Stop(grace)
				mu.Lock()
				current[role] = append(current[role], c)
				mu.Unlock()
				t.Logf("rolled %s to %s", p.Name(), c.Name())
			}
		})
	}
	roll.Wait()
	stopChanges()
	changes.Wait()
	if t.Failed() {
		return
	}

	t.Run("this commit's uc takes every change, and re-creates no child", func(t *testing.T) {
		gadgets.changeEach(t) // once more each, all old Pods gone
		eventually(t, 2*time.Minute, func() error { return gadgets.converged(ctx, current) })
		after := gadgets.childUIDs(t)
		for name, uid := range children {
			if after[name] != uid {
				t.Errorf("%s was re-created: UID %s before the upgrade, %s after", name, uid, after[name])
			}
		}
		t.Logf("%d changes made through the upgrade, every one applied", gadgets.changes)
	})
	t.Run("a new watcher leads", func(t *testing.T) {
		eventually(t, 30*time.Second, func() error {
			for _, p := range current["watcher"] {
				if strings.Contains(p.Log(), "leading: this watcher is active") {
					return nil
				}
			}
			return fmt.Errorf("none of the new watchers leads")
		})
	})
}

// gracePeriod is how long the kubelet waits for a Pod of spec to stop.
func gracePeriod(spec corev1.PodSpec) time.Duration {
	if s := spec.TerminationGracePeriodSeconds; s != nil {
		return time.Duration(*s) * time.Second
	}
	return 30 * time.Second // the API server's default
}

// ucRelease is a release of uc built from its source: its binary and its
// chart's directory.
type ucRelease struct{ bin, chart string }

// buildPreviousRelease builds previousRelease from its commit into dir.
func buildPreviousRelease(t *testing.T, dir string) ucRelease {
	t.Helper()
	src := filepath.Join(dir, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	archive := exec.CommandContext(t.Context(), "git", "archive", "--format=tar", previousRelease.commit)
	archive.Dir = env.root
	untar := exec.CommandContext(t.Context(), "tar", "-x", "-C", src)
	var err error
	if untar.Stdin, err = archive.StdoutPipe(); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	archive.Stderr, untar.Stderr = &stderr, &stderr
	if err := untar.Start(); err != nil {
		t.Fatal(err)
	}
	if err := archive.Run(); err != nil {
		t.Fatalf("git archive %s (%s): %v: %s (a shallow clone lacks it)", previousRelease.commit, previousRelease.tag, err, stderr.String())
	}
	if err := untar.Wait(); err != nil {
		t.Fatalf("untar %s: %v: %s", previousRelease.tag, err, stderr.String())
	}
	start := time.Now()
	bin := filepath.Join(dir, "uc")
	build := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "./cmd/uc")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build uc %s: %v\n%s", previousRelease.tag, err, out)
	}
	t.Logf("built uc %s in %s", previousRelease.tag, time.Since(start).Round(time.Second))
	return ucRelease{bin: bin, chart: filepath.Join(src, "deploy", "helm", "uc")}
}

// helmActions is Helm's configuration for releases in namespace on the
// test bed, their state in Secrets as helm keeps it.
func helmActions(t *testing.T, namespace string) *action.Configuration {
	t.Helper()
	kubeconfig := env.bed.Kubeconfig()
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig, flags.Namespace = &kubeconfig, &namespace
	cfg := new(action.Configuration)
	if err := cfg.Init(flags, namespace, "secret", func(string, ...any) {}); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// upgradeTo upgrades the release to this commit's chart with vals.
func upgradeTo(t *testing.T, helm *action.Configuration, vals map[string]any) (*release.Release, error) {
	t.Helper()
	ch, err := loader.Load(filepath.Join(env.root, "deploy", "helm", "uc"))
	if err != nil {
		return nil, err
	}
	up := action.NewUpgrade(helm)
	up.Namespace = upgradeRelease
	rel, err := up.RunWithContext(t.Context(), upgradeRelease, ch, vals)
	if err != nil {
		return nil, err
	}
	t.Logf("helm upgraded the release to chart %s, revision %d", rel.Chart.Metadata.Version, rel.Version)
	return rel, nil
}

// upgradeValues are the release's values, with the users' NATS
// configuration made by bin's `uc nats-config` for the Gadget controller.
func upgradeValues(t *testing.T, bin string) map[string]any {
	t.Helper()
	conf, err := exec.CommandContext(t.Context(), bin, "nats-config", "--controllers", upgradeUC).Output()
	if err != nil {
		t.Fatalf("%s nats-config: %v", bin, err)
	}
	return map[string]any{
		"controllerSelector": installLabel + "=upgrade",
		"watcher":            map[string]any{"replicas": 2},
		"applier":            map[string]any{"replicas": 2},
		"nats": map[string]any{"auth": map[string]any{
			"extraUsers": []any{natsauth.HookUser(upgradeUC)},
			"conf":       string(conf),
		}},
	}
}

// upgradeHookPassword is user's password in the Secret of the NATS users'
// passwords the chart made.
func upgradeHookPassword(t *testing.T, m manifests.Set, user string) string {
	t.Helper()
	key := natsauth.PasswordVariable(user)
	for _, s := range m.OfKind("Secret") {
		sec := manifests.Typed[corev1.Secret](t, m, "Secret", s.GetName())
		if pw, ok := sec.Data[key]; ok {
			return string(pw)
		}
	}
	t.Fatalf("no Secret of the release holds %s", key)
	return ""
}

// upgradeStartRoles starts every replica of every role's Deployment of
// objs, with uc bin, and returns them by role.
func upgradeStartRoles(t *testing.T, bin string, objs manifests.Objects, dir, natsURL, scraper, suffix string) map[string][]*testbed.Container {
	t.Helper()
	procs := map[string][]*testbed.Container{}
	for _, role := range manifests.Roles {
		d := manifests.Typed[appsv1.Deployment](t, objs.Set, "Deployment", upgradeRelease+"-"+role)
		for i := range *d.Spec.Replicas {
			procs[role] = append(procs[role], upgradeStartRole(t, bin, objs, d, role, i, dir, natsURL, scraper, suffix))
		}
	}
	return procs
}

// upgradeStartRole starts replica i of role's Deployment with uc bin, its
// Pod's name suffixed (a new ReplicaSet's Pods have new names).
func upgradeStartRole(t *testing.T, bin string, objs manifests.Objects, d *appsv1.Deployment, role string, i int32, dir, natsURL, scraper, suffix string) *testbed.Container {
	t.Helper()
	pod := d.DeepCopy()
	pod.Name += suffix
	return deployStartRolePod(t, bin, objs, pod, role, i, dir, natsURL, scraper)
}

// upgradeAwaitReady waits until every process runs and answers its probes.
func upgradeAwaitReady(t *testing.T, procs map[string][]*testbed.Container) {
	t.Helper()
	eventually(t, time.Minute, func() error {
		for _, p := range slices.Concat(slices.Collect(maps.Values(procs))...) {
			if err := p.Check(); err != nil {
				return backoffStop{err}
			}
			if err := p.Ready(t.Context()); err != nil {
				return err
			}
		}
		return nil
	})
}

// gadgetWriter makes and changes Gadgets, and remembers the replicas it
// last gave each.
type gadgetWriter struct {
	ns      string
	mu      sync.Mutex
	want    map[string]int64
	changes int
}

func newGadgetWriter(ns string) *gadgetWriter {
	return &gadgetWriter{ns: ns, want: map[string]int64{}}
}

func (g *gadgetWriter) create(t *testing.T, name string) {
	t.Helper()
	gadget := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "deploy.e2e.universalcontroller.dev/v1", "kind": "Gadget",
		"metadata": map[string]any{"name": name, "namespace": g.ns},
		"spec":     map[string]any{"deploymentName": name + "-web", "replicas": int64(1)},
	}}
	if _, err := env.dyn.Resource(deployGadgetGVR).Namespace(g.ns).Create(t.Context(), gadget, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	g.mu.Lock()
	g.want[name] = 1
	g.mu.Unlock()
}

// scale sets a Gadget's replicas to the next of 1..4.
func (g *gadgetWriter) scale(ctx context.Context, name string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	next := g.want[name]%4 + 1
	patch := fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, next)
	if _, err := env.dyn.Resource(deployGadgetGVR).Namespace(g.ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("scale gadget %s: %w", name, err)
	}
	g.want[name] = next
	g.changes++
	return nil
}

func (g *gadgetWriter) names() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Sorted(maps.Keys(g.want))
}

// keepChanging scales the Gadgets in turn, one every 100 ms, until ctx
// ends.
func (g *gadgetWriter) keepChanging(ctx context.Context, t *testing.T) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	names := g.names()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if err := g.scale(ctx, names[i%len(names)]); err != nil && ctx.Err() == nil {
			t.Error(err)
			return
		}
	}
}

// changeEach scales every Gadget once.
func (g *gadgetWriter) changeEach(t *testing.T) {
	t.Helper()
	for _, name := range g.names() {
		if err := g.scale(t.Context(), name); err != nil {
			t.Fatal(err)
		}
	}
}

// converged returns nil when every Gadget's Deployment, controlled by the
// Gadget, has the replicas last given to the Gadget, and its Service
// exists, while every process of procs runs.
func (g *gadgetWriter) converged(ctx context.Context, procs map[string][]*testbed.Container) error {
	for _, p := range slices.Concat(slices.Collect(maps.Values(procs))...) {
		if err := p.Check(); err != nil {
			return backoffStop{err}
		}
	}
	g.mu.Lock()
	want := maps.Clone(g.want)
	g.mu.Unlock()
	for name, replicas := range want {
		d, err := env.kube.AppsV1().Deployments(g.ns).Get(ctx, name+"-web", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("gadget %s has no Deployment yet", name)
		} else if err != nil {
			return err
		}
		if ref := metav1.GetControllerOf(d); ref == nil || ref.Kind != "Gadget" || ref.Name != name {
			return fmt.Errorf("deployment %s is controlled by %v, not gadget %s", d.Name, ref, name)
		}
		if d.Spec.Replicas == nil || *d.Spec.Replicas != int32(replicas) {
			return fmt.Errorf("deployment %s has %v replicas, gadget %s wants %d", d.Name, d.Spec.Replicas, name, replicas)
		}
		if _, err := env.kube.CoreV1().Services(g.ns).Get(ctx, name+"-web", metav1.GetOptions{}); err != nil {
			return fmt.Errorf("gadget %s's service: %w", name, err)
		}
	}
	return nil
}

// childUIDs are the UIDs of the Gadgets' Deployments and Services, by
// kind and name.
func (g *gadgetWriter) childUIDs(t *testing.T) map[string]types.UID {
	t.Helper()
	deployments, err := env.kube.AppsV1().Deployments(g.ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	services, err := env.kube.CoreV1().Services(g.ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	uids := map[string]types.UID{}
	for _, d := range deployments.Items {
		uids["Deployment "+d.Name] = d.UID
	}
	for _, s := range services.Items {
		uids["Service "+s.Name] = s.UID
	}
	if len(uids) != 2*upgradeGadgets {
		t.Fatalf("%d Deployments and Services in %s, want one of each per Gadget (%d)", len(uids), g.ns, upgradeGadgets)
	}
	return uids
}

// upgradeSync is the Gadgets' sync hook: the Foo example's (a Deployment
// of the Gadget's replicas), and a Service in front of its Pods, which
// never changes.
func upgradeSync(ctx context.Context, req *hook.SyncRequest) (*hook.SyncResponse, error) {
	resp, err := foo.Sync(ctx, req)
	if err != nil {
		return nil, err
	}
	name := req.Parent.GetName()
	// A map, not a corev1.Service: that encodes targetPort 0, which the
	// API server sets to the port, so that the Service would differ from
	// its desired state as soon as it is created and be re-created forever.
	resp.Children = append(resp.Children, map[string]any{
		"apiVersion": "v1", "kind": "Service",
		"metadata": map[string]any{"name": name + "-web"},
		"spec": map[string]any{
			"selector": map[string]any{"app": "nginx", "controller": name},
			"ports":    []any{map[string]any{"port": 80}},
		},
	})
	return resp, nil
}
