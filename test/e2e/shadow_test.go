package e2e

// hooks.sync.shadow (issue 17, §5): a second sync hook gets the same
// requests, its replies are compared with the sync hook's and never
// applied.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"universalcontroller.dev/uc/internal/inspect"
	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/sdk/go/hook"
)

// shadowOfEcho is a shadow of the echo hook that wants the first child's
// data.v to be "shadow", and fails for the parents named broken-….
func shadowOfEcho(_ context.Context, req *hook.SyncRequest) (*hook.SyncResponse, error) {
	if strings.HasPrefix(req.Parent.GetName(), "broken-") {
		return nil, errors.New("the new hook is broken")
	}
	children, _, _ := unstructured.NestedSlice(req.Parent, "spec", "children") // a copy
	if len(children) > 0 {
		_ = unstructured.SetNestedField(children[0].(map[string]any), "shadow", "data", "v")
	}
	return &hook.SyncResponse{Status: map[string]any{"echo": true}, Children: children}, nil
}

// ucEvents lists uc's own Events of that reason on the object called name.
func ucEvents(ctx context.Context, ns, name, reason string) ([]corev1.Event, error) {
	list, err := env.kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: fields.SelectorFromSet(fields.Set{
		"involvedObject.name": name, "reason": reason}).String()})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// shadowMetric is the value of a shadow metric of the controller.
func shadowMetric(ctx context.Context, name string, labels map[string]string) (float64, error) {
	families, err := scrapeMetrics(ctx, "http://"+env.uc.metricsAddr+"/metrics")
	if err != nil {
		return 0, err
	}
	v, _ := value(families[name], labels)
	return v, nil
}

// TestShadowHook: a controller whose sync hook has a bus-native shadow
// that wants one child otherwise. The parent converges to the sync hook's
// children, and the cluster never holds the shadow's; the difference is
// counted, shown by uc trace, and recorded as one Normal Event, not again
// when the same difference comes back. A shadow that fails leaves its
// parent Synced, and is counted.
func TestShadowHook(t *testing.T) {
	ctx := t.Context()
	ns := namespace(t)
	const controller = "shadowed"
	configMaps := recordChanges(t, schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, ns)
	registerComposite(t, controller, func(spec map[string]any) {
		spec["hooks"] = map[string]any{"sync": map[string]any{"version": "v1",
			"shadow": map[string]any{"version": "v1", "delivery": map[string]any{"maxDeliveries": int64(2), "backoffDelay": "100ms"}}}}
	})
	serveHooks(t, controller, hook.Shadow(shadowOfEcho))
	children := func(name string) map[string]any {
		return map[string]any{"selector": selectApp(name), "children": []any{
			cm(name+"-a", map[string]any{"app": name}, map[string]any{"v": "1"}),
			cm(name+"-b", map[string]any{"app": name}, map[string]any{"v": "1"})}}
	}
	createComposite(t, ns, "web", controller, children("web"))
	createComposite(t, ns, "broken-web", controller, children("broken-web"))

	// The difference: counted, on uc trace, and one Event.
	eventually(t, time.Minute, func() error {
		v, err := shadowMetric(ctx, "uc_shadow_diffs_total", map[string]string{"controller": controller, "kind": "changed"})
		if err == nil && v < 1 {
			err = errors.New("no changed child counted yet")
		}
		return err
	})
	var diffEvent corev1.Event
	eventually(t, time.Minute, func() error {
		events, err := ucEvents(ctx, ns, "web", "ShadowDiffers")
		if err != nil {
			return err
		}
		if len(events) != 1 || events[0].Type != "Normal" || !strings.Contains(events[0].Message, "it changes ConfigMap.v1 "+ns+"/web-a") {
			return fmt.Errorf("ShadowDiffers Events %v", events)
		}
		diffEvent = events[0]
		return nil
	})
	traces, err := ucJSON[[]inspect.Trace](ctx, "trace", "composite/web", "-n", ns)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(traces[0].Plans, func(m *inspect.Message) bool { return m.Hook == hooks.SyncShadow })
	if i < 0 {
		t.Fatalf("uc trace shows no shadow plan: %+v", traces[0].Plans)
	}
	d := traces[0].Plans[i].Plan.ShadowDiff
	if d == nil || len(d.Changed) != 1 || d.Changed[0].Child != "ConfigMap.v1 "+ns+"/web-a" || len(d.Added)+len(d.Removed)+len(d.Status) > 0 ||
		!strings.Contains(d.Changed[0].Diff, `-  v: "1"`) || !strings.Contains(d.Changed[0].Diff, "+  v: shadow") {
		t.Errorf("the shadow's difference on uc trace: %+v", d)
	}
	if out, err := ucCLI(ctx, "trace", "composite/web", "-n", ns); err != nil || !strings.Contains(out, "changed   ConfigMap.v1 "+ns+"/web-a") {
		t.Errorf("uc trace's text: %v\n%s", err, out)
	}

	// The same difference again: compared, counted, not recorded again.
	before, err := shadowMetric(ctx, "uc_shadow_replies_total", map[string]string{"controller": controller, "outcome": "different"})
	if err != nil {
		t.Fatal(err)
	}
	mustUC(t, "resync", "composite/web", "-n", ns)
	eventually(t, time.Minute, func() error {
		v, err := shadowMetric(ctx, "uc_shadow_replies_total", map[string]string{"controller": controller, "outcome": "different"})
		if err == nil && v <= before {
			err = fmt.Errorf("%v comparisons that differ, want more than %v", v, before)
		}
		return err
	})
	if events, err := ucEvents(ctx, ns, "web", "ShadowDiffers"); err != nil || len(events) != 1 || events[0].Count != diffEvent.Count {
		t.Errorf("the same difference again recorded: %v, %v", events, err)
	}

	// A failing shadow: its parent is Synced all the same, and it is counted.
	eventually(t, time.Minute, func() error {
		v, err := shadowMetric(ctx, "uc_shadow_replies_total", map[string]string{"controller": controller, "outcome": "failed"})
		if err == nil && v < 1 {
			err = errors.New("no failure of the shadow counted yet")
		}
		return errors.Join(err, compositeSynced(ctx, ns, "broken-web"), compositeSynced(ctx, ns, "web"))
	})
	if events, err := ucEvents(ctx, ns, "broken-web", "ShadowDiffers"); err != nil || len(events) != 0 {
		t.Errorf("a failing shadow's parent has ShadowDiffers Events: %v, %v", events, err)
	}

	// Only the sync hook's children were ever in the cluster.
	for _, c := range configMaps.all() {
		if v, _, _ := unstructured.NestedString(c.obj.Object, "data", "v"); v != "1" && c.obj.GetName() != "kube-root-ca.crt" {
			t.Errorf("ConfigMap %s had data.v %q (resourceVersion %s)", c.obj.GetName(), v, c.obj.GetResourceVersion())
		}
	}
	for _, name := range []string{"web-a", "web-b", "broken-web-a"} {
		if cm, err := getConfigMap(ctx, ns, name); err != nil || cm.Data["v"] != "1" {
			t.Errorf("ConfigMap %s: %v, %v", name, cm, err)
		}
	}
}
