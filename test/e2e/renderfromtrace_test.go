package e2e

// uc render --from-trace (issue 17, §5): the last request uc published for
// a parent, replayed on this machine against a changed hook.

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"universalcontroller.dev/uc/internal/render"
	"universalcontroller.dev/uc/schemas/hooks"
)

// rawRequests serves the echo hook and keeps the last request of each
// parent as the hook received it.
type rawRequests struct {
	mu   sync.Mutex
	last map[string][]byte // by parent name
}

func (h *rawRequests) Hook() string { return hooks.Sync }

func (h *rawRequests) Handle(ctx context.Context, data []byte) (any, error) {
	var req hooks.SyncRequest
	if err := json.Unmarshal(data, &req); err != nil {
		return nil, err
	}
	h.mu.Lock()
	h.last[req.Parent.GetName()] = data
	h.mu.Unlock()
	return echo(ctx, &req)
}

func (h *rawRequests) of(name string) []byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.last[name]
}

// ucRender runs uc with args against the suite's cluster and NATS, or
// without either when offline, and returns its standard output and
// error.
func ucRender(ctx context.Context, offline bool, args ...string) (string, string, error) {
	cmd := exec.CommandContext(ctx, env.uc.bin, args...)
	cmd.Env = os.Environ()
	if !offline {
		cmd.Env = append(cmd.Env, "UC_KUBECONFIG="+env.bed.Kubeconfig(), "UC_NATS_URL="+env.uc.natsURL)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	return string(out), stderr.String(), err
}

// sameJSON tells two JSON documents that hold the same values.
func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var va, vb any
	if err := json.Unmarshal(a, &va); err != nil {
		t.Fatalf("%v: %s", err, a)
	}
	if err := json.Unmarshal(b, &vb); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	return reflect.DeepEqual(va, vb)
}

// TestRenderFromTrace: uc render --from-trace renders the request uc last
// published for a parent — the one its hook received — with another hook,
// and plans its reply against the children that request observed: a
// changed hook's update shows with its diff, a broken hook's reply is
// rejected as the parent would say. Nothing in the cluster changes.
// --save writes the request as files that uc render reads offline, giving
// the same request.
func TestRenderFromTrace(t *testing.T) {
	ctx := t.Context()
	ns := namespace(t)
	const controller = "fromtrace"
	h := &rawRequests{last: map[string][]byte{}}
	registerCompositeWith(t, controller, h, nil)
	createEchoComposite(t, ns, "web", controller, "1")
	eventually(t, time.Minute, func() error { return compositeSynced(ctx, ns, "web") })
	before, err := getConfigMap(ctx, ns, "web-cm")
	if err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	fixed := filepath.Join(dir, "fixed.py")
	writeScript(t, fixed, `import json, sys
req = json.load(sys.stdin)
name = req["parent"]["metadata"]["name"]
print("fixed hook for", name, file=sys.stderr)
json.dump({"status": {"fixed": True}, "children": [{"apiVersion": "v1", "kind": "ConfigMap",
    "metadata": {"name": name + "-cm", "labels": {"app": name}}, "data": {"v": "2"}}]}, sys.stdout)
`)
	broken := filepath.Join(dir, "broken.py")
	writeScript(t, broken, `import json, sys
json.dump({"children": [{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "nope"}}]}, sys.stdout)
`)
	target := []string{"render", "--from-trace", "composite/web", "-n", ns}

	// The request is the one the hook received last.
	out, notes, err := ucRender(ctx, false, append(target, "-o", "request")...)
	if err != nil {
		t.Fatalf("uc render --from-trace -o request: %v\n%s", err, notes)
	}
	if !sameJSON(t, []byte(out), h.of("web")) {
		t.Errorf("the request rendered is not the one the hook received last:\n%s\nwant\n%s", out, h.of("web"))
	}
	if !strings.Contains(notes, "note: the sync request ") {
		t.Errorf("render does not say the request is the one published: %s", notes)
	}

	// A changed hook: the plan updates the child, with its diff.
	out, notes, err = ucRender(ctx, false, append(target, "-o", "json", "--exec", "python3 "+fixed)...)
	if err != nil {
		t.Fatalf("uc render --from-trace: %v\n%s", err, notes)
	}
	var r render.Result
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(r.Plan) != 1 || r.Plan[0].Action != "update" || r.Plan[0].Name != "web-cm" ||
		!strings.Contains(r.Plan[0].Diff, `-  v: "1"`) || !strings.Contains(r.Plan[0].Diff, `+  v: "2"`) {
		t.Errorf("plan %+v, want web-cm updated from v 1 to 2", r.Plan)
	}
	if r.Parent.Object["status"].(map[string]any)["fixed"] != true || !strings.Contains(notes, "fixed hook for web") {
		t.Errorf("status %v, notes %s", r.Parent.Object["status"], notes)
	}

	// A broken hook: rejected as the parent would say it.
	_, notes, err = ucRender(ctx, false, append(target, "--exec", "python3 "+broken)...)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 ||
		!strings.Contains(notes, "the parent would get Synced=False, InvalidHookReply: sync hook reply rejected: children[0] Secret.v1 \"nope\": kind not declared") {
		t.Errorf("a broken hook's reply: %v\n%s", err, notes)
	}

	// Saved, then rendered offline from the files: the same request.
	saved := filepath.Join(dir, "saved")
	if _, notes, err = ucRender(ctx, false, append(target, "--save", saved, "-o", "request")...); err != nil {
		t.Fatalf("uc render --from-trace --save: %v\n%s", err, notes)
	}
	at := func(name string) string { return filepath.Join(saved, name) }
	out, notes, err = ucRender(ctx, true, "render", "-o", "request", "--controller", at("controller.yaml"), "--crd", at("crds.yaml"),
		"--parent", at("parent.yaml"), "--observed", at("observed.yaml"), "--related", at("related.yaml"))
	if err != nil {
		t.Fatalf("uc render of the saved files: %v\n%s", err, notes)
	}
	if !sameJSON(t, []byte(out), h.of("web")) {
		t.Errorf("the saved files render another request:\n%s\nwant\n%s", out, h.of("web"))
	}

	after, err := getConfigMap(ctx, ns, "web-cm")
	if err != nil {
		t.Fatal(err)
	}
	if after.ResourceVersion != before.ResourceVersion {
		t.Errorf("render changed the ConfigMap: resourceVersion %s → %s", before.ResourceVersion, after.ResourceVersion)
	}
}

func writeScript(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
