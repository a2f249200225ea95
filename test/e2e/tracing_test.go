package e2e

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"universalcontroller.dev/uc/internal/tracing/otlptest"
)

// TestTracing: one change of a parent is one trace, exported over OTLP by
// every process it crosses, here to a receiver in the test. uc run (its
// endpoint from --otlp-endpoint) and a separate `uc worker` serving the
// Python example's hook (from OTEL_EXPORTER_OTLP_ENDPOINT) serve a
// controller of their own (--controller-selector). After a Website is
// edited, the ConfigMap's update is a span in a trace that starts with the
// watcher's sync and holds, connected parent to child across the three
// services, the publish, the request's wait on the bus, the hook call and
// its command's run, the reply's wait, the apply, its plan and its write.
func TestTracing(t *testing.T) {
	ctx := t.Context()
	receiver := otlptest.Start()
	t.Cleanup(receiver.Close)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "200") // export every 200ms, not 5s
	traced, err := startUC(ctx, env.uc.bin, env.uc.kubeconfig, filepath.Join(t.TempDir(), "traced"),
		"--controller-selector", installLabel+"=traced", "--otlp-endpoint", receiver.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(traced.stop)

	const controller, dir = "traced-website", "examples/python-worker"
	gvr := schema.GroupVersionResource{Group: "examples.universalcontroller.dev", Version: "v1", Resource: "websites"}
	installCRD(t, dir+"/crd.yaml", gvr)
	registerManifest(t, dir+"/controller.yaml", func(o *unstructured.Unstructured) {
		o.SetName(controller)
		o.SetLabels(map[string]string{installLabel: "traced"})
	})
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.Endpoint())
	startExecWorkerOn(t, traced.natsURL, controller, "python3", filepath.Join(env.root, dir, "hook.py"))
	ns := namespace(t)
	createManifest(t, dir+"/website.yaml", gvr, ns)
	page := func(want string) func() error {
		return func() error {
			cm, err := env.kube.CoreV1().ConfigMaps(ns).Get(ctx, "hello", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if got := cm.Data["index.html"]; got != "<h1>"+want+"</h1>\n" {
				return fmt.Errorf("page %q, want %s", got, want)
			}
			return nil
		}
	}
	eventually(t, 2*time.Minute, page("Hello from a Python hook"))
	patchParent(t, gvr, ns, "hello", `{"spec":{"message":"Traced"}}`)
	eventually(t, time.Minute, page("Traced"))

	// The edit's trace: the one whose apply wrote the new page.
	want := []string{"uc-watcher/sync", "uc-watcher/claim", "uc-watcher/publish", "uc-worker/bus wait", "uc-worker/hook sync",
		"uc-worker/exec", "uc-applier/reply wait", "uc-applier/apply", "uc-applier/plan", "uc-applier/write"}
	var spans []otlptest.Span
	eventually(t, 30*time.Second, func() error {
		write, ok := lastChange(receiver.Spans(), "configmaps", ns+"/hello")
		if !ok {
			return fmt.Errorf("no span of a change of ConfigMap %s/hello among %d spans", ns, len(receiver.Spans()))
		}
		spans = receiver.Trace(write.TraceID)
		var missing []string
		for _, w := range want {
			if !slices.ContainsFunc(spans, func(s otlptest.Span) bool { return s.Service+"/"+s.Name == w }) {
				missing = append(missing, w)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("the trace of the page's write lacks %s", strings.Join(missing, ", "))
		}
		return otlptest.Connected(spans)
	})
	for _, s := range spans {
		if s.ParentID == "" && (s.Name != "sync" || s.Attributes["uc.parent"] != ns+"/hello" || s.Attributes["uc.controller"] != controller) {
			t.Errorf("the trace starts with %s %v, want the watcher's sync of %s/hello", s.Name, s.Attributes, ns)
		}
		t.Logf("%s %s/%s %s %v", s.SpanID, s.Service, s.Name, s.ParentID, time.Duration(s.EndNano-s.StartNano))
	}
}

// lastChange is the last span among spans of a write that changed object
// (namespace/name) of resource.
func lastChange(spans []otlptest.Span, resource, object string) (otlptest.Span, bool) {
	var last otlptest.Span
	found := false
	for _, s := range spans {
		a := s.Attributes
		if s.Name == "write" && a["uc.resource"] == resource && a["uc.object"] == object && a["uc.changed"] == "true" && a["uc.dry_run"] == "false" &&
			(!found || s.StartNano > last.StartNano) {
			last, found = s, true
		}
	}
	return last, found
}
