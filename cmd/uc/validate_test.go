package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestValidate: uc validate exits 0 on valid controller objects, and 1 on
// a typo or a wrong type, naming the file, the object and the field's
// path.
func TestValidate(t *testing.T) {
	good := "../../examples/python-worker/controller.yaml"
	data, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(t.TempDir(), "controller.yaml")
	typo := strings.Replace(string(data), "parentResource:", "parentResorce:", 1)
	if typo == string(data) {
		t.Fatal("the example has no parentResource to misspell")
	}
	if err := os.WriteFile(bad, []byte(typo), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := runUC(t, "validate", good); out.code != 0 || !strings.Contains(out.stdout, "1 controller objects valid") {
		t.Errorf("uc validate %s: exit %d\n%s%s", good, out.code, out.stdout, out.stderr)
	}
	out := runUC(t, "validate", bad)
	if out.code != 1 || !strings.Contains(out.stderr, bad+`: UniversalController website-controller: unknown field "spec.parentResorce"`) {
		t.Errorf("uc validate %s: exit %d, want 1 and the field's path\n%s%s", bad, out.code, out.stdout, out.stderr)
	}
}
