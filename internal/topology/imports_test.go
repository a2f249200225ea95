package topology_test

import (
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "universalcontroller.dev/uc/"

// roles are uc's role packages.
var roles = []string{module + "watcher", module + "dispatcher", module + "applier"}

// mayImportRoles are the only packages that may import a role, each for a
// reason. Every other package — the contract (schemas/...), the SDK, this
// bus topology, the test helpers — imports none, tests included, and a
// role imports no other role.
var mayImportRoles = map[string]string{
	module + "cmd/uc":          "the binary runs the roles",
	module + "internal/render": "uc render runs the watcher's, the dispatcher's and the applier's code offline",
	module + "test/e2e":        "the end-to-end tests run the roles",
}

// TestImportsOfRoles checks the rule above on the module's import graph, as
// `go list -test -deps` gives it.
func TestImportsOfRoles(t *testing.T) {
	graph := importGraph(t)
	var checked int
	for pkg := range graph {
		if !strings.HasPrefix(pkg, module) || plain(pkg) != pkg || mayImportRoles[pkg] != "" {
			continue
		}
		checked++
		root := pkg
		if _, ok := graph[pkg+".test"]; ok {
			root = pkg + ".test" // the package with its tests
		}
		for _, role := range roles {
			if role == pkg {
				continue
			}
			if path := importPath(graph, root, role); path != nil {
				t.Errorf("%s imports the role %s (tests included): %s", pkg, role, strings.Join(path, " -> "))
			}
		}
	}
	if checked < 30 {
		t.Fatalf("checked %d packages; go list gave %d", checked, len(graph))
	}
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
