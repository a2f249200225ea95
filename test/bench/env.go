package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"universalcontroller.dev/uc/examples/fanout"
	"universalcontroller.dev/uc/schemas/crds"
	"universalcontroller.dev/uc/test/testbed"
)

// Namespaces of the measurements.
const (
	floorNamespace   = "bench-floor"
	phaseNamespace   = "bench"
	sharingNamespace = "bench-sharing"
	hooksNamespace   = "bench-hooks"
)

// clients talk to the test bed's apiserver without client-side rate
// limits, so the driver is never what throttles a phase.
type clients struct {
	kube kubernetes.Interface
	dyn  dynamic.Interface
}

func newClients(cfg *rest.Config) (clients, error) {
	cfg.QPS, cfg.Burst = -1, 0 // no client-side rate limit
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return clients{}, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	return clients{kube, dyn}, err
}

// env is the test bed and what every measurement shares.
type env struct {
	cfg config
	dir string // work directory: the bed's and uc's data and logs
	bed *testbed.Bed
	// api reads, watches, scrapes metrics and registers controllers;
	// driver makes the driver's writes to the workload, each counted by
	// driverRequests.
	api, driver    clients
	driverRequests *requestCounter
	ucBin          string
	hookBin        string // delayhook, for the hook scaling
	hook           *countingHook
	failed         bool // keep dir for its logs
}

// startEnv starts the test bed, installs the CRDs and builds uc.
func startEnv(ctx context.Context, cfg config) (*env, error) {
	dir, err := os.MkdirTemp("", "uc-bench-")
	if err != nil {
		return nil, err
	}
	e := &env{cfg: cfg, dir: dir, driverRequests: newRequestCounter(), hook: newCountingHook()}
	begin := time.Now()
	built := make(chan error, 1)
	go func() { built <- e.build(ctx) }()
	if e.bed, err = testbed.Start(ctx, testbed.Options{Dir: filepath.Join(dir, "bed"), Logf: logf}); err != nil {
		<-built
		e.failed = true
		e.stop()
		return nil, err
	}
	if err := e.setup(ctx); err != nil {
		<-built
		e.failed = true
		e.stop()
		return nil, err
	}
	if err := <-built; err != nil {
		e.failed = true
		e.stop()
		return nil, err
	}
	logf("environment ready in %s (work dir %s)", time.Since(begin).Round(time.Millisecond), dir)
	return e, nil
}

func (e *env) setup(ctx context.Context) error {
	var err error
	if e.api, err = newClients(e.bed.RESTConfig()); err != nil {
		return err
	}
	counted := e.bed.RESTConfig()
	counted.Wrap(e.driverRequests.wrap)
	if e.driver, err = newClients(counted); err != nil {
		return err
	}
	if err := crds.Install(ctx, e.bed.RESTConfig()); err != nil {
		return err
	}
	if err := installCRD(ctx, e.bed.RESTConfig(), fanout.CRD); err != nil {
		return err
	}
	for _, ns := range []string{floorNamespace, phaseNamespace, sharingNamespace, hooksNamespace} {
		obj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
		if _, err := e.api.kube.CoreV1().Namespaces().Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("namespace %s: %w", ns, err)
		}
	}
	return e.warmUp(ctx)
}

// warmUp writes one Fanout and deletes it: the apiserver sets up a new
// CRD's storage on its first requests, which is not what the floor measures.
func (e *env) warmUp(ctx context.Context) error {
	fanouts := e.api.dyn.Resource(fanout.GVR).Namespace(floorNamespace)
	if _, err := fanouts.Create(ctx, newFanout(floorNamespace, "warm-up", 0, "", nil), metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("warm up: %w", err)
	}
	return fanouts.Delete(ctx, "warm-up", metav1.DeleteOptions{})
}

// build builds what the run needs of this repository: uc, unless -uc-bin
// gives it, and the hook processes of the hook scaling.
func (e *env) build(ctx context.Context) error {
	e.ucBin = e.cfg.ucBin
	if e.ucBin == "" {
		e.ucBin = filepath.Join(e.dir, "uc-bin")
		if err := goBuild(ctx, e.ucBin, "./cmd/uc"); err != nil {
			return err
		}
	}
	if len(e.cfg.hookWorkers) == 0 {
		return nil
	}
	e.hookBin = filepath.Join(e.dir, "delayhook")
	return goBuild(ctx, e.hookBin, "./test/bench/delayhook")
}

// goBuild builds a package of this repository into out.
func goBuild(ctx context.Context, out, pkg string) error {
	_, file, _, _ := runtime.Caller(0)
	build := exec.CommandContext(ctx, "go", "build", "-o", out, pkg)
	build.Dir = filepath.Join(filepath.Dir(file), "..", "..")
	if b, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("build %s: %w\n%s", pkg, err, b)
	}
	return nil
}

// stop stops the test bed and removes the work directory, unless something
// failed: then it keeps it for its logs. uc's logs are kept either way,
// beside the results: a run whose numbers are odd is explained by them.
func (e *env) stop() {
	if e.bed != nil {
		e.bed.Stop()
	}
	if e.failed {
		logf("work directory kept for its logs: %s", e.dir)
		return
	}
	if err := e.keepLogs(); err != nil {
		logf("uc's logs not kept: %v", err)
	}
	_ = os.RemoveAll(e.dir)
}

// keepLogs copies the logs of every uc process the run started (each in a
// directory uc-* of the work directory) to the results directory, under
// logs-<the work directory's name>.
func (e *env) keepLogs() error {
	logs, err := filepath.Glob(filepath.Join(e.dir, "uc-*", "*.log"))
	if err != nil || len(logs) == 0 {
		return err
	}
	dest := filepath.Join(e.cfg.out, "logs-"+filepath.Base(e.dir))
	if err := os.MkdirAll(dest, 0o755); err != nil {
		return err
	}
	for _, log := range logs {
		data, err := os.ReadFile(log)
		if err != nil {
			return err
		}
		name := filepath.Base(filepath.Dir(log)) + "-" + filepath.Base(log)
		if err := os.WriteFile(filepath.Join(dest, name), data, 0o644); err != nil {
			return err
		}
	}
	logf("uc's logs kept in %s", dest)
	return nil
}

// installCRD creates a CustomResourceDefinition from its manifest and waits
// until it is established.
func installCRD(ctx context.Context, cfg *rest.Config, manifest []byte) error {
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(manifest, &crd); err != nil {
		return err
	}
	cs, err := clientset.NewForConfig(cfg)
	if err != nil {
		return err
	}
	client := cs.ApiextensionsV1().CustomResourceDefinitions()
	if _, err := client.Create(ctx, &crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create CRD %s: %w", crd.Name, err)
	}
	return waitFor(ctx, time.Minute, "CRD "+crd.Name+" established", func(ctx context.Context) (bool, error) {
		got, err := client.Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range got.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	}, nil)
}
