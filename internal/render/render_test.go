package render

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"universalcontroller.dev/uc/core"
	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

const hookPy = "python3 testdata/hook.py"

// thing is the Thing test controller's render options with hook as its
// exec command; edit sets more.
func thing(hook string, edit func(*Options)) Options {
	// A minute for the hook, not the controller's 3s: on a loaded machine
	// Python alone may take longer to start. The case about the
	// controller's timeout sets none.
	opts := Options{Controller: []string{"testdata/controller.yaml"}, CRDs: []string{"testdata/crd.yaml"},
		Parent: "testdata/parent.yaml", Exec: hook, Output: OutputJSON, MaxChildren: 10, Timeout: time.Minute}
	if edit != nil {
		edit(&opts)
	}
	return opts
}

// render runs a render and decodes its JSON result.
func render(t *testing.T, opts Options) (*Result, string, error) {
	t.Helper()
	var out, notes bytes.Buffer
	err := Run(t.Context(), opts, &out, &notes)
	if err != nil {
		return nil, notes.String(), err
	}
	var r Result
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("output is not a result: %v\n%s", err, out.String())
	}
	return &r, notes.String(), nil
}

// plan formats a result's plan: "action kind namespace/name" each.
func plan(r *Result) string {
	var steps []string
	for _, s := range r.Plan {
		steps = append(steps, fmt.Sprintf("%s %s %s/%s", s.Action, s.Kind, s.Namespace, s.Name))
	}
	return strings.Join(steps, ", ")
}

// TestRender: the hook gets the request the watcher builds, its reply is
// checked and planned as the applier plans it, against the observed
// children, and what the hook writes to its standard error is passed on.
func TestRender(t *testing.T) {
	t.Run("no children yet", func(t *testing.T) {
		r, notes, err := render(t, thing(hookPy, nil))
		if err != nil {
			t.Fatal(err)
		}
		if want := "create ConfigMap.v1 shop/web-a, create ConfigMap.v1 shop/web-b, create Secret.v1 shop/web-token"; plan(r) != want {
			t.Errorf("plan %s, want %s", plan(r), want)
		}
		// Every declared kind has an entry, even empty.
		if got := fmt.Sprint(r.Parent.Object["status"]); got != "map[kinds:[ConfigMap.v1 Secret.v1] observed:[]]" {
			t.Errorf("status %s", got)
		}
		for _, c := range r.Children {
			refs := c.GetOwnerReferences()
			if c.GetNamespace() != "shop" || len(refs) != 1 || refs[0].UID != "11111111-2222-3333-4444-555555555555" ||
				c.GetLabels()["controller-uid"] != "11111111-2222-3333-4444-555555555555" || c.GetAnnotations()[v1alpha1.AnnotationAppliedHash] == "" {
				t.Errorf("child %s is not as uc writes it: %v", c.GetName(), c.Object["metadata"])
			}
		}
		if !strings.Contains(notes, "working on web") {
			t.Errorf("the hook's standard error is not passed on: %q", notes)
		}
	})
	t.Run("observed children", func(t *testing.T) {
		r, _, err := render(t, thing(hookPy, func(o *Options) { o.Observed = []string{"testdata/observed.yaml"} }))
		if err != nil {
			t.Fatal(err)
		}
		want := "update ConfigMap.v1 shop/web-a, adopt ConfigMap.v1 shop/web-b, kept Secret.v1 shop/web-token, delete ConfigMap.v1 shop/web-gone"
		if plan(r) != want {
			t.Errorf("plan %s, want %s", plan(r), want)
		}
		// The request observed the parent's children and the orphan it
		// claims, keyed namespace/name (v2), not the other namespace's.
		if got := fmt.Sprint(r.Parent.Object["status"].(map[string]any)["observed"]); got != "[shop/web-a shop/web-b shop/web-gone shop/web-token]" {
			t.Errorf("the hook observed %s", got)
		}
		if d := r.Plan[0].Diff; !strings.Contains(d, "-  name: old\n+  name: a\n") || strings.Contains(d, "resourceVersion") {
			t.Errorf("the update's diff is not the fields the hook sets:\n%s", d)
		}
		if d := r.Plan[2].Diff; !strings.Contains(d, "+  token: new") {
			t.Errorf("the kept Secret's diff:\n%s", d)
		}
	})
	t.Run("a request of hook version v1 keys children by name", func(t *testing.T) {
		req := request(t, thing("", func(o *Options) {
			o.Controller = []string{"testdata/composite.yaml"}
			o.Observed = []string{"testdata/observed.yaml"}
		}))
		if _, ok := req.Children["ConfigMap.v1"]["web-a"]; !ok || req.Controller.GetKind() != "CompositeController" {
			t.Errorf("children %v of controller %s", req.Children, req.Controller.GetKind())
		}
	})
	t.Run("a parent being deleted gets the finalize hook", func(t *testing.T) {
		r, _, err := render(t, thing(hookPy, func(o *Options) {
			o.Parent = writeFile(t, "parent.yaml", `{"apiVersion": "example.com/v1", "kind": "Thing",
				"metadata": {"name": "web", "namespace": "shop", "uid": "u", "deletionTimestamp": "2026-01-01T00:00:00Z", "finalizers": ["universalcontroller.dev/things"]}}`)
		}))
		if err != nil {
			t.Fatal(err)
		}
		if r.Hook != hooks.Finalize || r.Finalized == nil || !*r.Finalized || len(r.Children) != 0 {
			t.Errorf("hook %s, finalized %v, children %d", r.Hook, r.Finalized, len(r.Children))
		}
	})
	t.Run("a reply that speaks back", func(t *testing.T) {
		r, _, err := render(t, thing(`echo '{"children": [], "events": [{"type": "Warning", "reason": "Low", "message": "m"}],
			"conditions": [{"type": "Ready", "status": "False", "reason": "Waiting"}]}'`, nil))
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(r.Events, r.Conditions) != "[{Warning Low m}] [{Ready False Waiting }]" {
			t.Errorf("events %v, conditions %v", r.Events, r.Conditions)
		}
	})
	t.Run("a webhook", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var req hooks.SyncRequest
			if err := json.NewDecoder(r.Body).Decode(&req); err != nil || r.Method != http.MethodPost {
				http.Error(w, "bad request", http.StatusBadRequest)
				return
			}
			fmt.Fprintf(w, `{"children": [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": %q}}]}`, req.Parent.GetName())
		}))
		defer srv.Close()
		r, _, err := render(t, thing("", func(o *Options) { o.URL = srv.URL }))
		if err != nil {
			t.Fatal(err)
		}
		if plan(r) != "create ConfigMap.v1 shop/web" {
			t.Errorf("plan %s", plan(r))
		}
	})
}

// TestRenderCustomize: a controller with a customize hook gets its related
// objects as the watcher selects them with the customize reply, and a
// customize reply the watcher refuses fails the parent's sync.
func TestRenderCustomize(t *testing.T) {
	copies := func(hook string, edit func(*Options)) Options {
		return thing(hook, func(o *Options) {
			o.Controller = []string{"testdata/copies.yaml"}
			o.Related = []string{"testdata/related.yaml"}
			if edit != nil {
				edit(o)
			}
		})
	}
	r, _, err := render(t, copies("python3 testdata/copies.py", nil))
	if err != nil {
		t.Fatal(err)
	}
	if plan(r) != "create ConfigMap.v1 shop/copy-team-a-x" {
		t.Errorf("plan %s, want the one related ConfigMap's copy", plan(r))
	}
	var out bytes.Buffer
	opts := copies("python3 testdata/copies.py", func(o *Options) { o.Hook = hooks.Customize })
	if err := Run(t.Context(), opts, &out, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	var c Customized
	if err := json.Unmarshal(out.Bytes(), &c); err != nil {
		t.Fatal(err)
	}
	if len(c.RelatedResources) != 1 || len(c.Related["ConfigMap.v1"]) != 1 || c.Related["ConfigMap.v1"]["team-a/x"] == nil {
		t.Errorf("customize rendered %+v", c)
	}
	_, _, err = render(t, copies("python3 testdata/copies.py bad", nil))
	var rejected *core.Rejection
	if !errors.As(err, &rejected) || rejected.Reason != "InvalidHookReply" ||
		rejected.Message != "customize hook reply rejected: relatedResources[0] (configmaps) has both names and labelSelector" {
		t.Errorf("err %v, want the customize reply rejected", err)
	}
	_, _, err = render(t, copies("exit 3", nil))
	if !errors.As(err, &rejected) || !strings.HasPrefix(rejected.Message, "customize hook failed, will retry: WorkerError: ") {
		t.Errorf("err %v, want the customize hook's failure", err)
	}
}

// request renders the request alone.
func request(t *testing.T, opts Options) *hooks.SyncRequest {
	t.Helper()
	opts.Output = OutputRequest
	var out bytes.Buffer
	if err := Run(t.Context(), opts, &out, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	var req hooks.SyncRequest
	if err := json.Unmarshal(out.Bytes(), &req); err != nil {
		t.Fatal(err)
	}
	return &req
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := t.TempDir() + "/" + name
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestRenderRejected: a hook that fails, or a reply the applier would
// reject, is a Rejection saying what the parent's Synced condition would,
// and a bad hook is bounded.
func TestRenderRejected(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "database down", http.StatusInternalServerError)
	}))
	defer srv.Close()
	for _, tc := range []struct {
		name            string
		opts            Options
		reason, message string
		within          time.Duration
	}{
		{name: "garbage", opts: thing(`echo 'Traceback (most recent call last):'`, nil),
			reason: "InvalidHookReply", message: "sync hook reply rejected: not a valid sync response: "},
		{name: "exit 1", opts: thing(`echo 'ValueError: no spec' >&2; exit 1`, nil),
			reason: "HookFailed", message: `sync hook failed, will retry: WorkerError: sh -c echo 'ValueError: no spec' >&2; exit 1: exit status 1: stderr: "ValueError: no spec"`},
		{name: "hangs", opts: thing(`sleep 60`, func(o *Options) { o.Timeout = 300 * time.Millisecond }),
			reason: "HookFailed", message: "sync hook failed, will retry: Timeout: no reply within 300ms", within: 3 * time.Second},
		{name: "the controller's timeout", opts: thing(`sleep 60`, func(o *Options) { o.Timeout = 0 }),
			reason: "HookFailed", message: "sync hook failed, will retry: Timeout: no reply within 3s", within: 6 * time.Second},
		{name: "100 MB on stdout", opts: thing(`head -c 100000000 /dev/zero`, nil),
			reason: "HookFailed", message: "sync hook failed, will retry: InvalidReply: sh -c head -c 100000000 /dev/zero: reply larger than 8388608 bytes: killed", within: 10 * time.Second},
		{name: "an undeclared kind", opts: thing(`echo '{"children": [{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}}]}'`, nil),
			reason: "InvalidHookReply", message: `sync hook reply rejected: children[0] Deployment.apps/v1 "d": kind not declared in childResources`},
		{name: "another namespace", opts: thing(`echo '{"children": [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "kube-system"}}]}'`, nil),
			reason: "InvalidHookReply", message: `sync hook reply rejected: children[0] ConfigMap.v1 "c": namespace "kube-system" is outside the parent's namespace "shop"`},
		{name: "an object the parent may not take over", opts: thing(`echo '{"children": [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "web-a"}}]}'`, func(o *Options) {
			o.Observed = []string{writeFile(t, "theirs.yaml", `{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "web-a", "namespace": "shop"}}`)}
		}), reason: "InvalidHookReply", message: `sync hook reply rejected: children[0] ConfigMap.v1 "web-a": an object of that name exists, is controlled by no one`},
		{name: "an unknown field in a v2 reply", opts: thing(`echo '{"children": [], "satus": {}}'`, nil),
			reason: "InvalidHookReply", message: `sync hook reply rejected: not a valid sync response: unknown field "satus"`},
		{name: "too many children", opts: thing(hookPy, func(o *Options) { o.MaxChildren = 2 }),
			reason: "InvalidHookReply", message: "sync hook reply rejected: 3 children, more than the 2 a reply may have"},
		{name: "a webhook's error", opts: thing("", func(o *Options) { o.URL = srv.URL }),
			reason: "HookFailed", message: "sync hook failed, will retry: HTTPError: POST " + srv.URL + `: 500 Internal Server Error: "database down"`},
		{name: "no selector", opts: thing(hookPy, func(o *Options) {
			o.Controller = []string{writeFile(t, "c.yaml", `{"apiVersion": "universalcontroller.dev/v1alpha1", "kind": "UniversalController", "metadata": {"name": "c"},
				"spec": {"parentResource": {"apiVersion": "example.com/v1", "resource": "things"}}}`)}
		}), reason: "InvalidSelector", message: "the parent has no spec.selector"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			_, _, err := render(t, tc.opts)
			took := time.Since(start)
			var r *core.Rejection
			if !errors.As(err, &r) || r.Reason != tc.reason || !strings.HasPrefix(r.Message, tc.message) {
				t.Fatalf("err %v, want a rejection %s: %s…", err, tc.reason, tc.message)
			}
			if tc.within > 0 && took > tc.within {
				t.Errorf("took %s, want at most %s", took, tc.within)
			}
		})
	}
}

// TestRenderInputs: what render cannot work from is said.
func TestRenderInputs(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
		err  string
	}{
		{"no CRD for a custom resource", thing(hookPy, func(o *Options) { o.CRDs = nil }), "give its CustomResourceDefinition with --crd"},
		{"a parent of another kind", thing(hookPy, func(o *Options) { o.Parent = "testdata/crd.yaml" }), "is a apiextensions.k8s.io/v1, Kind=CustomResourceDefinition"},
		{"two controllers of the parent's kind", thing(hookPy, func(o *Options) { o.Controller = append(o.Controller, "testdata/composite.yaml") }), "2 of the controllers [things cc=things] have parents of the parent's kind"},
		{"a bus-native hook without a command", thing("", nil), "give the command that serves it (--exec) or its URL (--url)"},
		{"no such file", thing(hookPy, func(o *Options) { o.Observed = []string{"testdata/nothing.yaml"} }), "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := render(t, tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("err %v, want one saying %q", err, tc.err)
			}
		})
	}
}

// TestOfflineMapper: built-in kinds resolve without a cluster, with their
// scope, irregular plurals included.
func TestOfflineMapper(t *testing.T) {
	m, err := OfflineMapper(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		apiVersion, resource, kind string
		namespaced                 bool
	}{
		{"v1", "pods", "Pod", true},
		{"v1", "endpoints", "Endpoints", true},
		{"v1", "events", "Event", true},
		{"events.k8s.io/v1", "events", "Event", true},
		{"v1", "namespaces", "Namespace", false},
		{"apps/v1", "deployments", "Deployment", true},
		{"networking.k8s.io/v1", "ingresses", "Ingress", true},
		{"rbac.authorization.k8s.io/v1", "clusterroles", "ClusterRole", false},
	} {
		in := &inputs{mapper: m}
		res, err := in.resolve(v1alpha1.ResourceRule{APIVersion: tc.apiVersion, Resource: tc.resource})
		if err != nil || res.GVK.Kind != tc.kind || res.Namespaced != tc.namespaced {
			t.Errorf("%s %s: %+v, %v", tc.apiVersion, tc.resource, res, err)
		}
	}
}

// TestRenderRejectsInvalidControllers: a controller file with a field uc
// does not know (a typo) or a value of the wrong type is an error naming
// the field's path, as kubectl --validate=strict would make it.
func TestRenderRejectsInvalidControllers(t *testing.T) {
	data, err := os.ReadFile("testdata/controller.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, from, to, want string
	}{
		{"a typo", "delivery: {timeout: 3s}", "delivery: {timeot: 3s}", `UniversalController things: unknown field "spec.hooks.sync.delivery.timeot"`},
		{"a wrong type", "generateSelector: true", "generateSelector: yes please", `spec.generateSelector: Invalid value: "string": must be of type boolean`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "controller.yaml")
			if err := os.WriteFile(path, bytes.Replace(data, []byte(tc.from), []byte(tc.to), 1), 0o644); err != nil {
				t.Fatal(err)
			}
			_, _, err := render(t, thing(hookPy, func(o *Options) { o.Controller = []string{path} }))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v, want one saying %q", err, tc.want)
			}
		})
	}
}
