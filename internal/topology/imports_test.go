package topology_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "universalcontroller.dev/uc/"

// layers are uc's packages from the bottom up. A package imports packages
// of its own layer and of the layers below it, never of one above, nor of
// another layer at its level; and no role imports another role. Tests are
// included, with one allowance: a test may use a test kit of any layer (a
// package named *test, or the test bed), which is itself in a layer and
// checked as any package is. Each package of the module is in exactly one
// layer.
var layers = []struct {
	name     string
	level    int
	packages []string // a path, or a path/... for it and everything under it
}{
	{"contract", 0, []string{"schemas/..."}},
	{"runtime", 1, []string{ // shared by the roles and the SDK, knows no controller
		"sdk/...", "internal/recovery", "internal/verdict", "internal/workloop", "internal/tracing/...",
		"internal/topology", "internal/natsauth", "internal/shares", "internal/revision", "internal/schemacheck",
		"internal/golden", "internal/bustest", "internal/objtest", "internal/compact", "internal/exechook", "internal/webhook/...",
		"internal/natstls", "internal/natsreload", "internal/version", "internal/ujson",
	}},
	{"hooks", 2, []string{"examples/..."}}, // hooks as their authors write them, on the SDK
	{"core", 2, []string{"core/..."}},
	{"cluster", 3, []string{"internal/registry", "internal/preflight", "internal/metawrites"}}, // caches, checks and writes of the cluster
	{"roles", 4, roles},
	{"tools", 4, []string{"internal/render", "internal/inspect", "internal/scaffold", "internal/rbac", "internal/release"}}, // they decide with the core, never a role
	{"commands", 5, []string{"cmd/...", "hack/release", "deploy"}},
	{"tests", 6, []string{"test/...", "internal/contracttest"}},
}

// roles are uc's role packages: no role imports another.
var roles = []string{"watcher/...", "dispatcher/...", "applier/..."}

// noIO are the imports the decision core never makes: it reads no cluster,
// no bus, no network and no file.
var noIO = []string{"k8s.io/client-go/", "github.com/nats-io/", "github.com/cloudevents/", "net", "os", "knative.dev/pkg/"}

// TestLayers checks the order above on the module's import graph, as
// `go list -test -deps` gives it.
func TestLayers(t *testing.T) {
	graph := importGraph(t)
	layer := map[string]int{} // by package
	for pkg := range graph {
		if !strings.HasPrefix(pkg, module) || plain(pkg) != pkg {
			continue
		}
		rel := strings.TrimPrefix(pkg, module)
		l, ok := layerOf(rel)
		if !ok {
			t.Errorf("%s is in no layer: add it to layers", rel)
			continue
		}
		layer[rel] = l
	}
	for pkg, l := range layer {
		reported := map[string]bool{}
		for _, root := range []string{module + pkg, module + pkg + ".test"} {
			for _, imp := range deps(graph, root) {
				il, ok := layer[imp]
				if !ok || imp == pkg || reported[imp] {
					continue
				}
				if problem := forbidden(pkg, l, imp, il); problem != "" {
					reported[imp] = true
					t.Errorf("%s %s: %s", pkg, problem, strings.Join(importPath(graph, root, module+imp), " -> "))
				}
			}
		}
	}
	if len(layer) < 50 {
		t.Fatalf("checked %d packages; go list gave %d", len(layer), len(graph))
	}
}

// forbidden says why pkg, in layers[l], may not import imp, in layers[il],
// or is "".
func forbidden(pkg string, l int, imp string, il int) string {
	from, to := layers[l], layers[il]
	switch {
	case to.level > from.level:
		return fmt.Sprintf("(%s) imports %s (%s, above it)", from.name, imp, to.name)
	case to.level == from.level && to.name != from.name:
		return fmt.Sprintf("(%s) imports %s (%s, at its level)", from.name, imp, to.name)
	case from.name == "roles" && il == l && role(pkg) != role(imp):
		return fmt.Sprintf("(a role) imports the role %s", imp)
	}
	return ""
}

// TestCoreDoesNoIO checks that the core's own files import nothing that
// reads or writes the world.
func TestCoreDoesNoIO(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{join .Imports \"\\n\"}}", module+"core").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	imports := strings.Fields(string(out))
	if len(imports) < 5 {
		t.Fatalf("core imports %v: go list gave too little", imports)
	}
	for _, imp := range imports {
		for _, bad := range noIO {
			if imp == bad || strings.HasSuffix(bad, "/") && strings.HasPrefix(imp, bad) || strings.HasPrefix(imp, bad+"/") {
				t.Errorf("core imports %s", imp)
			}
		}
	}
}

// layerOf is the layer of a package, by its path in the module.
func layerOf(pkg string) (int, bool) {
	for i, l := range layers {
		for _, p := range l.packages {
			if p == pkg || strings.HasSuffix(p, "/...") && (pkg == strings.TrimSuffix(p, "/...") || strings.HasPrefix(pkg, strings.TrimSuffix(p, "..."))) {
				return i, true
			}
		}
	}
	return 0, false
}

// role is the role a package of the roles layer belongs to.
func role(pkg string) string {
	r, _, _ := strings.Cut(pkg, "/")
	return r
}

// deps are the module's packages that root imports, directly or not, by
// their path in the module. From a test (root ends in .test), test kits are
// not followed: a test may use any.
func deps(graph map[string][]string, root string) []string {
	test := strings.HasSuffix(root, ".test")
	seen := map[string]bool{root: true}
	queue := []string{root}
	var out []string
	for len(queue) > 0 {
		pkg := queue[0]
		queue = queue[1:]
		for _, imp := range graph[pkg] {
			p := plain(imp)
			if seen[imp] || test && testKit(p) {
				continue
			}
			seen[imp] = true
			queue = append(queue, imp)
			if strings.HasPrefix(p, module) {
				out = append(out, strings.TrimPrefix(p, module))
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// testKit tells a package made for tests: named *test, or the test bed.
func testKit(pkg string) bool {
	return strings.HasSuffix(pkg, "test") && !strings.HasSuffix(pkg, "/test") || strings.HasSuffix(pkg, "/test/testbed")
}

// importGraph is every package of the module, its tests, and their
// dependencies, each with what it imports. A package compiled for a test
// is named "path [path.test]", a test main "path.test".
func importGraph(t *testing.T) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-test", "-deps", "-json=ImportPath,Imports", module+"...")
	out, err := cmd.Output()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			t.Fatalf("go list: %v\n%s", err, exit.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	graph := map[string][]string{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list's output: %v", err)
		}
		graph[p.ImportPath] = p.Imports
	}
	return graph
}

// importPath is a chain of imports from root to a variant of target, or
// nil.
func importPath(graph map[string][]string, root, target string) []string {
	from := map[string]string{root: ""}
	queue := []string{root}
	for len(queue) > 0 {
		pkg := queue[0]
		queue = queue[1:]
		if plain(pkg) == target {
			path := []string{plain(pkg)}
			for p := from[pkg]; p != ""; p = from[p] {
				path = append(path, plain(p))
			}
			slices.Reverse(path)
			return slices.Compact(path) // a package, then its test variant
		}
		for _, imp := range graph[pkg] {
			if _, seen := from[imp]; !seen {
				from[imp] = pkg
				queue = append(queue, imp)
			}
		}
	}
	return nil
}

// plain is a package's import path without its test variant's suffix.
func plain(pkg string) string {
	pkg, _, _ = strings.Cut(pkg, " ")
	return strings.TrimSuffix(strings.TrimSuffix(pkg, ".test"), "_test")
}
