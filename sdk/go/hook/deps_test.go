package hook

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// lightDependencies are the only packages outside the standard library the
// SDK may depend on: nats.go, the CloudEvents SDK, what they depend on, and
// uc's bus contract. apimachinery's types package (UID, a string type,
// with no dependencies of its own) comes with the contract's Meta.
// OpenTelemetry's API may come for tracing, with the spans' helpers uc
// shares (schemas/bus, trace.go), built on the API alone (OpenTelemetry's
// SDK and exporters may not: they belong to the hook process's main).
var lightDependencies = []string{
	"universalcontroller.dev/uc/sdk/go/", // the SDK's module
	"universalcontroller.dev/uc/schemas/bus",
	"github.com/nats-io/",
	"github.com/cloudevents/sdk-go/",
	"github.com/google/uuid",
	"github.com/json-iterator/go",
	"github.com/modern-go/",
	"github.com/klauspost/compress/",
	"golang.org/x/crypto/",
	"golang.org/x/sys/",
	"k8s.io/apimachinery/pkg/types",
	"go.opentelemetry.io/otel",
	"go.opentelemetry.io/auto/sdk",
	"github.com/go-logr/",
	"github.com/cespare/xxhash/v2",
}

// heavyDependencies are never light, whatever lightDependencies allows.
var heavyDependencies = []string{"go.opentelemetry.io/otel/sdk", "go.opentelemetry.io/otel/exporters"}

// TestDependenciesStayLight: a hook built on the SDK carries no Kubernetes
// client, no knative.dev, no metrics library — nothing but what
// lightDependencies lists.
func TestDependenciesStayLight(t *testing.T) {
	deps := goList(t, "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".")
	for _, dep := range deps {
		if !allowed(dep) {
			t.Errorf("the SDK depends on %s", dep)
		}
	}
	t.Logf("%d packages outside the standard library", len(deps))
}

// heavyModules are modules a hook's module graph must not hold: uc's own
// module (the SDK and the bus contract are modules of their own so that a
// hook does not inherit it), and what uc's processes and tests bring.
var heavyModules = []string{
	"universalcontroller.dev/uc",
	"github.com/nats-io/nats-server/v2",
	"k8s.io/api",
	"k8s.io/client-go",
	"helm.sh/helm/v3",
	"knative.dev/pkg",
	"go.opentelemetry.io/otel/sdk",
	"github.com/prometheus/client_golang",
}

// TestModuleStaysLight: the SDK's module graph — what a hook's go.mod
// inherits, tests included — holds none of heavyModules. A requirement
// added for a test counts too: a test that needs uc's module belongs to
// uc's (internal/contracttest).
func TestModuleStaysLight(t *testing.T) {
	modules := goList(t, "-m", "-f", "{{if not .Main}}{{.Path}}{{end}}", "all")
	for _, m := range modules {
		if slices.Contains(heavyModules, m) {
			t.Errorf("the SDK's module graph holds %s", m)
		}
	}
	t.Logf("%d modules in the graph", len(modules))
}

// goList runs go list with args in the SDK's module and returns what it
// lists, failing the test unless that is 10 or more.
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("go list %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	listed := strings.Fields(string(out))
	if len(listed) < 10 {
		t.Fatalf("go list %s listed %d: %q", strings.Join(args, " "), len(listed), listed)
	}
	return listed
}

func allowed(pkg string) bool {
	for _, heavy := range heavyDependencies {
		if strings.HasPrefix(pkg, heavy) {
			return false
		}
	}
	for _, light := range lightDependencies {
		if pkg == light || (strings.HasSuffix(light, "/") && strings.HasPrefix(pkg, light)) ||
			strings.HasPrefix(pkg, light+"/") {
			return true
		}
	}
	return false
}

func TestAllowed(t *testing.T) {
	for pkg, want := range map[string]bool{
		"github.com/nats-io/nats.go/jetstream":              true,
		"k8s.io/apimachinery/pkg/types":                     true,
		"k8s.io/apimachinery/pkg/typesx":                    false,
		"k8s.io/apimachinery/pkg/apis/meta/v1":              false,
		"k8s.io/client-go/rest":                             false,
		"knative.dev/pkg/apis/duck/v1":                      false,
		"go.opentelemetry.io/otel/trace":                    true,
		"go.opentelemetry.io/otel/sdk/trace":                false,
		"go.opentelemetry.io/otel/exporters/otlp/otlptrace": false,
		"universalcontroller.dev/uc/schemas/hooks":          false,
		"universalcontroller.dev/uc/schemas/bus":            true,
		"universalcontroller.dev/uc/sdk/go/hook":            true,
		"universalcontroller.dev/uc/internal/tracing":       false,
	} {
		if got := allowed(pkg); got != want {
			t.Errorf("allowed(%s) = %v, want %v", pkg, got, want)
		}
	}
}
