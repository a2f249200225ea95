package e2e

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/v1alpha1"
	"universalcontroller.dev/uc/sdk/go/hook"
	"universalcontroller.dev/uc/test/testbed"
)

// TestMetricsDocumented reconciles on the test bed what each of uc's
// metrics is about — a webhook hook that answers and one that fails until
// its request is dead-lettered, a bus-native hook, a rollout that waits
// for a status check — then scrapes the shared `uc run`'s /metrics: every
// metric of the README's table is served (the table and the code cannot
// drift apart), and those of these controllers say what happened.
func TestMetricsDocumented(t *testing.T) {
	ctx := t.Context()
	documented, err := testbed.DocumentedMetrics(filepath.Join(env.root, "docs", "operating.md"))
	if err != nil {
		t.Fatal(err)
	}
	ns := namespace(t)

	const webhook = "metrics-webhook"
	_, srv := newEchoHook(t, webhook, plain)
	srv.Start()
	registerEchoController(t, webhook, v1alpha1.Hook{Webhook: &v1alpha1.Webhook{URL: &srv.URL}, Delivery: fastDelivery(time.Second)})
	createEcho(t, ns, "answers", webhook, "v1", "")
	fails := createEcho(t, ns, "fails", webhook, "v1", "fail")
	if !t.Run("a webhook hook answers, another's request is dead-lettered", func(t *testing.T) {
		eventually(t, time.Minute, func() error { return echoSynced(ctx, ns, "answers", webhook, "v1") })
		eventually(t, time.Minute, func() error { return hookFailed(ctx, ns, "fails", "will retry: HTTPError") })
		eventually(t, time.Minute, func() error { return deadLettered(ctx, webhook, fails, hook.ReasonHTTPError) })
	}) {
		return
	}

	// A bus-native hook rolls Pods out one at a time, the moved one held
	// by a status check it cannot pass.
	const rolling = "metrics-rolling"
	registerComposite(t, rolling, func(spec map[string]any) {
		spec["childResources"] = []any{map[string]any{"apiVersion": "v1", "resource": "pods", "updateStrategy": map[string]any{
			"method": "RollingRecreate", "statusChecks": map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": "False"}}}}}}
	})
	children := func(image string) []any {
		return []any{pod("a", "metrics", image), pod("b", "metrics", image), pod("c", "metrics", image)}
	}
	createComposite(t, ns, "p", rolling, map[string]any{"selector": selectApp("metrics"), "children": children("v1")})
	waitUpdated := func(t *testing.T, want string) {
		t.Helper()
		eventually(t, time.Minute, func() error {
			if r, err := updatedReason(ctx, ns, "p"); err != nil || r != want {
				return fmt.Errorf("Updated reason %q (err %v), want %s", r, err, want)
			}
			return nil
		})
	}
	if !t.Run("a rollout waits for a status check", func(t *testing.T) {
		waitUpdated(t, v1alpha1.ReasonOnLatestRevision)
		patchComposite(t, ns, "p", map[string]any{"spec": map[string]any{"children": children("v2")}})
		waitUpdated(t, v1alpha1.ReasonRolloutWaiting)
	}) {
		return
	}

	// A bus-native shadow wants one child otherwise.
	const shadowed = "metrics-shadowed"
	registerComposite(t, shadowed, func(spec map[string]any) {
		spec["hooks"] = map[string]any{"sync": map[string]any{"shadow": map[string]any{}}}
	})
	serveHooks(t, shadowed, hook.Shadow(shadowOfEcho))
	createComposite(t, ns, "shadowed", shadowed, map[string]any{"selector": selectApp("shadowed"),
		"children": []any{cm("shadowed-a", map[string]any{"app": "shadowed"}, map[string]any{"v": "1"})}})

	url := "http://" + env.uc.metricsAddr + "/metrics"
	var families map[string]*dto.MetricFamily
	if !t.Run("the metrics say what happened", func(t *testing.T) {
		eventually(t, 30*time.Second, func() error {
			if families, err = scrapeMetrics(ctx, url); err != nil {
				return err
			}
			for _, c := range []struct {
				name   string
				labels map[string]string
				check  func(float64) bool
				want   string
			}{
				{"uc_hook_calls_total", map[string]string{"controller": webhook, "outcome": "ok"}, atLeast(1), "≥ 1"},
				{"uc_hook_calls_total", map[string]string{"controller": webhook, "outcome": "http_5xx"}, atLeast(3), "≥ 3"},
				{"uc_hook_call_duration_seconds", map[string]string{"controller": webhook}, atLeast(4), "≥ 4 calls"},
				{"uc_hook_replies_total", map[string]string{"controller": webhook, "outcome": "dead_lettered", "reason": "HTTPError"}, atLeast(1), "≥ 1"},
				{"uc_hook_replies_total", map[string]string{"controller": rolling, "outcome": "ok"}, atLeast(2), "≥ 2"},
				{"uc_hook_round_trip_seconds", map[string]string{"controller": rolling}, atLeast(2), "≥ 2 replies"},
				{"uc_replies_rejected_total", map[string]string{"controller": webhook, "reason": "HookFailed"}, atLeast(1), "≥ 1"},
				{"uc_applies_total", map[string]string{"controller": rolling, "result": "applied"}, atLeast(2), "≥ 2"},
				{"uc_observation_to_applied_seconds", map[string]string{"controller": webhook}, atLeast(1), "≥ 1 apply"},
				{"uc_deadletter_messages", map[string]string{"controller": webhook, "hook": "sync"}, atLeast(1), "≥ 1"},
				{"uc_rollout_parents", map[string]string{"controller": rolling}, equal(1), "1"},
				{"uc_rollout_children", map[string]string{"controller": rolling, "revision": "latest"}, equal(1), "1 (a moved)"},
				{"uc_rollout_children", map[string]string{"controller": rolling, "revision": "older"}, equal(2), "2 (b and c)"},
				{"uc_consumer_pending_messages", map[string]string{"consumer": bus.HookConsumer(rolling, "sync")}, atLeast(0), "served"},
				{"uc_shadow_replies_total", map[string]string{"controller": shadowed, "outcome": "different"}, atLeast(1), "≥ 1"},
				{"uc_shadow_diffs_total", map[string]string{"controller": shadowed, "kind": "changed"}, atLeast(1), "≥ 1"},
			} {
				got, ok := value(families[c.name], c.labels)
				if !ok || !c.check(got) {
					return fmt.Errorf("%s%v = %v (served: %t), want %s", c.name, c.labels, got, ok, c.want)
				}
			}
			return nil
		})
	}) {
		return
	}
	t.Run("every metric of the README's table is served, and no other", func(t *testing.T) {
		start := time.Now()
		if families, err = scrapeMetrics(ctx, url); err != nil {
			t.Fatal(err)
		}
		t.Logf("a scrape took %s: %d metric families, the bus's infos read on the way", time.Since(start).Round(time.Millisecond), len(families))
		for _, name := range documented {
			if families[name] == nil {
				t.Errorf("%s is in the README's table of metrics, but uc does not serve it", name)
			}
		}
		for name := range families {
			if isUCMetric(name) && !slices.Contains(documented, name) {
				t.Errorf("uc serves %s, which the README's table of metrics does not list", name)
			}
		}
	})
}

// isUCMetric tells uc's own metrics, and the work queues', from the Go
// runtime's and the process' (the table lists a few of those).
func isUCMetric(name string) bool {
	return strings.HasPrefix(name, "uc_") || strings.HasPrefix(name, "workqueue_")
}

func atLeast(n float64) func(float64) bool { return func(v float64) bool { return v >= n } }
func equal(n float64) func(float64) bool   { return func(v float64) bool { return v == n } }

// scrapeMetrics reads a /metrics page.
func scrapeMetrics(ctx context.Context, url string) (map[string]*dto.MetricFamily, error) {
	code, body, err := httpGet(ctx, url)
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %d: %s", url, code, body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(strings.NewReader(body))
}

// value sums the series of a family that have labels: the values of
// counters and gauges, the counts of histograms.
func value(mf *dto.MetricFamily, labels map[string]string) (float64, bool) {
	if mf == nil {
		return 0, false
	}
	sum, found := 0.0, false
	for _, m := range mf.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		if !matchesLabels(have, labels) {
			continue
		}
		found = true
		switch {
		case m.Counter != nil:
			sum += m.GetCounter().GetValue()
		case m.Gauge != nil:
			sum += m.GetGauge().GetValue()
		case m.Histogram != nil:
			sum += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return sum, found
}

func matchesLabels(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}
