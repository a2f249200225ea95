// Package e2e tests uc end to end on the real test bed: a kube-apiserver on
// etcd with the controller-manager, the scheduler and kwok, and uc run as a
// separate process with its embedded NATS JetStream server. Hook workers run
// in the test process, on the bus, so the tests can count and steer calls.
package e2e

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"universalcontroller.dev/uc/schemas/crds"
	"universalcontroller.dev/uc/sdk/go/hook"
	"universalcontroller.dev/uc/test/testbed"
)

// env is what every test uses.
var env struct {
	bed  *testbed.Bed
	uc   *ucProcess
	kube kubernetes.Interface
	dyn  dynamic.Interface
	js   jetstream.JetStream
	foo  *countingHook // serves the Foo example's sync hook
	root string        // the repository
}

func TestMain(m *testing.M) {
	code, err := setup(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e setup:", err)
		os.Exit(1)
	}
	os.Exit(code)
}

func setup(m *testing.M) (int, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, file, _, _ := runtime.Caller(0)
	env.root = filepath.Join(filepath.Dir(file), "..", "..")
	dir, err := os.MkdirTemp("", "uc-e2e-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)

	start := time.Now()
	if env.bed, err = testbed.Start(ctx, testbed.Options{Dir: filepath.Join(dir, "bed"), Logf: logf}); err != nil {
		return 0, err
	}
	defer env.bed.Stop()
	logf("test bed up in %s", time.Since(start).Round(time.Millisecond))
	cfg := env.bed.RESTConfig()
	if env.kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return 0, err
	}
	if env.dyn, err = dynamic.NewForConfig(cfg); err != nil {
		return 0, err
	}
	if err := crds.Install(ctx, cfg); err != nil {
		return 0, err
	}
	// The shared uc serves Metacontroller's API (--metacontroller-api)
	// from Metacontroller's CRDs.
	for _, f := range []string{"examples/foo/crd.yaml", "test/e2e/testdata/bar-crd.yaml", "test/e2e/testdata/metacontroller-crds-v1.yaml"} {
		if err := applyFile(ctx, filepath.Join(env.root, f)); err != nil {
			return 0, err
		}
	}
	// TestInformersAreShared counts watches on Sharers: created now, the
	// garbage collector has long opened its own by then.
	if _, err := env.dyn.Resource(crdGVR).Create(ctx, sharerCRD(), metav1.CreateOptions{}); err != nil {
		return 0, err
	}

	bin := filepath.Join(dir, "uc-bin")
	build := exec.Command("go", "build", "-o", bin, "./cmd/uc")
	build.Dir, build.Stdout, build.Stderr = env.root, os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return 0, fmt.Errorf("build uc: %w", err)
	}
	// The suite's installation serves every controller but those labelled
	// for another one (TestControllerSelector's).
	if env.uc, err = startUC(ctx, bin, env.bed.Kubeconfig(), filepath.Join(dir, "uc"),
		"--metacontroller-api", "--controller-selector", "!"+installLabel); err != nil {
		return 0, err
	}
	defer env.uc.stop()

	nc, err := nats.Connect(env.uc.natsURL, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		return 0, err
	}
	defer nc.Close()
	if env.js, err = jetstream.New(nc); err != nil {
		return 0, err
	}
	env.foo = newCountingHook()
	go func() {
		if err := hook.Serve(ctx, env.js, "foo-controller", env.foo, hook.WithLogger(slog.Default())); err != nil && ctx.Err() == nil {
			logf("foo worker: %v", err)
		}
	}()
	if err := applyFile(ctx, filepath.Join(env.root, "examples/foo/controller.yaml")); err != nil {
		return 0, err
	}
	code := m.Run()
	if code != 0 || os.Getenv("UC_E2E_DUMP") != "" {
		env.uc.dumpLog()
	}
	return code, nil
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s e2e: %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}
