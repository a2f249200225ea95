package main

import (
	"github.com/prometheus/client_golang/prometheus"

	"universalcontroller.dev/uc/schemas/bus"
)

// shadowMetrics count how the replies of sync hooks' shadows compare with
// the sync hooks' (applier.ShadowObserver).
type shadowMetrics struct {
	replies *prometheus.CounterVec
	diffs   *prometheus.CounterVec
}

func newShadowMetrics() shadowMetrics {
	return shadowMetrics{
		replies: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "uc_shadow_replies_total",
			Help: "Replies of sync hooks' shadows (spec.hooks.sync.shadow), by controller, outcome and reason: same or different (compared with the sync hook's reply to the same request), failed (a failure report; reason: its reason), unmatched (dropped without a comparison; reason: no-sync-reply, no-shadow-reply, too-many).",
		}, []string{"controller", "outcome", "reason"}),
		diffs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "uc_shadow_diffs_total",
			Help: "Differences between a sync hook's reply and its shadow's, by controller and kind: added, removed or changed children, status fields, rejected (one reply would be rejected); a comparison counts once per kind it finds.",
		}, []string{"controller", "kind"}),
	}
}

func (sm shadowMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{sm.replies, sm.diffs}
}

func (sm shadowMetrics) Compared(controller string, d *bus.ShadowDiff) {
	if d.Empty() {
		sm.replies.WithLabelValues(controller, "same", "").Inc()
		return
	}
	sm.replies.WithLabelValues(controller, "different", "").Inc()
	for kind, found := range map[string]bool{
		"added": len(d.Added) > 0, "removed": len(d.Removed) > 0, "changed": len(d.Changed) > 0, "status": len(d.Status) > 0,
		"rejected": d.SyncRejected != nil || d.ShadowRejected != nil,
	} {
		if found {
			sm.diffs.WithLabelValues(controller, kind).Inc()
		}
	}
}

func (sm shadowMetrics) ShadowFailed(controller, reason string) {
	sm.replies.WithLabelValues(controller, "failed", reason).Inc()
}

func (sm shadowMetrics) Unmatched(controller, reason string) {
	sm.replies.WithLabelValues(controller, "unmatched", reason).Inc()
}
