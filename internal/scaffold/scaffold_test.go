package scaffold

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestWrite: the scaffold's request is the one uc would send about its
// parent — the kind's parent, an entry for each child kind — and its hook
// answers it alone with a ConfigMap and a status; a directory that exists
// and a kind that is not one are refused.
func TestWrite(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "greeting")
	wrote, err := Write(t.Context(), dir, Options{Kind: "Greeting", Group: "examples.universalcontroller.dev"})
	if err != nil {
		t.Fatal(err)
	}
	if len(wrote) != 5 {
		t.Errorf("wrote %v, want 5 files", wrote)
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
	hook := exec.CommandContext(t.Context(), "python3", filepath.Join(dir, "hook.py"))
	hook.Stdin = bytes.NewReader(data)
	out, err := hook.Output()
	if err != nil {
		t.Fatalf("the hook alone: %v\n%s", err, out)
	}
	var reply struct {
		Status   map[string]any
		Children []map[string]any
	}
	if err := json.Unmarshal(out, &reply); err != nil || len(reply.Children) != 1 || reply.Children[0]["kind"] != "ConfigMap" || reply.Status == nil {
		t.Errorf("the hook's reply %s (err %v), want its status and one ConfigMap", out, err)
	}

	if _, err := Write(t.Context(), dir, Options{Kind: "Greeting"}); !errors.Is(err, ErrExists) {
		t.Errorf("again into %s: err %v, want ErrExists", dir, err)
	}
	if _, err := Write(t.Context(), filepath.Join(t.TempDir(), "x"), Options{Kind: "greeting"}); err == nil {
		t.Error("a kind in lower case: no error")
	}
}
