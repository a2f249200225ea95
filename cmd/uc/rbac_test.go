package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"universalcontroller.dev/uc/internal/golden"
)

// rbacFiles are the RBAC files in the repository that uc rbac makes, with
// its arguments: paths from the repository's root.
var rbacFiles = []struct {
	file string
	args []string
}{
	{"deploy/examples/foo-controller-rbac.yaml", []string{"examples/foo/crd.yaml", "examples/foo/controller.yaml"}},
	{"test/e2e/testdata/deploy-gadget-rbac.yaml", []string{"test/e2e/testdata/deploy-gadget-crd.yaml", "test/e2e/testdata/deploy-gadget-controller.yaml"}},
}

// TestRBACFiles: every RBAC file the repository holds for a controller is
// what uc rbac makes of the controller today; a change to the controller
// or to uc rbac without `go test ./cmd/uc -run TestRBACFiles -update`
// fails here.
func TestRBACFiles(t *testing.T) {
	t.Chdir(filepath.Join("..", ".."))
	for _, f := range rbacFiles {
		t.Run(f.file, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := execute(t.Context(), append([]string{"rbac"}, f.args...), &stdout, &stderr); code != 0 {
				t.Fatalf("uc rbac %s: exit %d: %s", strings.Join(f.args, " "), code, stderr.String())
			}
			golden.CheckFile(t, f.file, stdout.Bytes())
		})
	}
}

// TestRBACUsage: what uc rbac refuses, and how it exits.
func TestRBACUsage(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		code   int
		stderr string
	}{
		{[]string{"rbac"}, 2, "give the files or directories of controller objects, or --from-cluster"},
		{[]string{"rbac", "no-such-file.yaml"}, 2, "no-such-file.yaml"},
		{[]string{"rbac", "--dispatcher-service-account", "uc-dispatcher", "rbac_test.go"}, 2, "want NAMESPACE:NAME"},
		{[]string{"rbac", "../../examples/foo/controller.yaml"}, 1, "give its CustomResourceDefinition"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := execute(t.Context(), tc.args, &stdout, &stderr); code != tc.code || !strings.Contains(stderr.String(), tc.stderr) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, stderr.String(), tc.code, tc.stderr)
			}
		})
	}
}
