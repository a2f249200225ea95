package scaffold

import (
	"encoding/json"
	"errors"
	"go/format"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestWrite: the scaffold's request is the one uc would send about its
// parent — the kind's parent, an entry for each child kind; a directory
// that exists, a kind that is not one and a language uc init does not
// write are refused, and a failed write leaves no directory behind.
func TestWrite(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "greeting")
	wrote, err := Write(t.Context(), dir, Options{Kind: "Greeting", Group: "examples.universalcontroller.dev"})
	if err != nil {
		t.Fatal(err)
	}
	if len(wrote) != 6 {
		t.Errorf("wrote %v, want 6 files", wrote)
	}
	data, err := os.ReadFile(filepath.Join(dir, "request.json"))
	if err != nil {
		t.Fatal(err)
	}
	var req struct {
		Controller struct{ Metadata struct{ Name string } }
		Parent     struct {
			APIVersion, Kind string
			Metadata         struct{ Name, UID string }
		}
		Children map[string]map[string]any
	}
	if err := json.Unmarshal(data, &req); err != nil {
		t.Fatalf("request.json: %v\n%s", err, data)
	}
	if req.Controller.Metadata.Name != "greeting-controller" || req.Parent.APIVersion != "examples.universalcontroller.dev/v1" ||
		req.Parent.Kind != "Greeting" || req.Parent.Metadata.Name != "hello" || req.Parent.Metadata.UID == "" || req.Children["ConfigMap.v1"] == nil {
		t.Errorf("request.json is not the request of greeting.yaml:\n%s", data)
	}

	if _, err := Write(t.Context(), dir, Options{Kind: "Greeting"}); !errors.Is(err, ErrExists) {
		t.Errorf("again into %s: err %v, want ErrExists", dir, err)
	}
	for _, opts := range []Options{{Kind: "greeting"}, {Kind: "Greeting", Language: "cobol"}} {
		if _, err := Write(t.Context(), filepath.Join(t.TempDir(), "x"), opts); err == nil {
			t.Errorf("%+v: no error", opts)
		}
	}
	// A plural the CRD's name cannot take: the request cannot be made.
	failed := filepath.Join(t.TempDir(), "x")
	if _, err := Write(t.Context(), failed, Options{Kind: "Greeting", Plural: "Not_A_Resource"}); err == nil {
		t.Error("a plural that is no resource name: no error")
	}
	if _, err := os.Stat(failed); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a failed write left %s: %v", failed, err)
	}
}

// TestLanguages: for each language, uc init writes the hook and its test
// in it, every template rendered (the kind in it, no action left), the Go
// files as gofmt makes them, and the controller naming the command that
// runs the hook.
func TestLanguages(t *testing.T) {
	for _, tc := range []struct {
		language  string
		hookFiles []string
		hook      string
	}{
		{"", []string{"hook.py", "test_hook.py"}, "python3 %s/hook.py"}, // python, the default
		{"python", []string{"hook.py", "test_hook.py"}, "python3 %s/hook.py"},
		{"go", []string{"go.mod", "main.go", "main_test.go"}, "go run -C %s ."},
		{"javascript", []string{"hook.js", "hook.test.js"}, "node %s/hook.js"},
		{"shell", []string{"hook.sh", "hook_test.sh"}, "sh %s/hook.sh"},
	} {
		t.Run(tc.language, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "greeting")
			if _, err := Write(t.Context(), dir, Options{Kind: "Greeting", Language: tc.language}); err != nil {
				t.Fatal(err)
			}
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			want := slices.Sorted(slices.Values(append([]string{"controller.yaml", "crd.yaml", "greeting.yaml", "request.json"}, tc.hookFiles...)))
			if !slices.Equal(names, want) {
				t.Errorf("wrote %v, want %v", names, want)
			}
			for _, name := range append([]string{"controller.yaml"}, tc.hookFiles...) {
				data, err := os.ReadFile(filepath.Join(dir, name))
				if err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(string(data), "reeting") || strings.Contains(string(data), "{{") {
					t.Errorf("%s names no Greeting, or holds a template's action:\n%s", name, data)
				}
				if strings.HasSuffix(name, ".go") {
					if formatted, err := format.Source(data); err != nil || string(formatted) != string(data) {
						t.Errorf("%s is not as gofmt makes it (err %v):\n%s", name, err, data)
					}
				}
			}
			hook := strings.ReplaceAll(tc.hook, "%s", dir)
			if controller, _ := os.ReadFile(filepath.Join(dir, "controller.yaml")); !strings.Contains(string(controller), "-- "+hook+"\n") {
				t.Errorf("controller.yaml does not name the hook's command %q:\n%s", hook, controller)
			}
			language := tc.language
			if language == "" {
				language = "python"
			}
			if cmds, err := CommandsOf(dir, language); err != nil || cmds.Hook != hook || !strings.Contains(cmds.Test, dir) {
				t.Errorf("CommandsOf(%s, %s) = %+v, %v; want the hook %q and a test in the directory", dir, language, cmds, err, hook)
			}
		})
	}
}
