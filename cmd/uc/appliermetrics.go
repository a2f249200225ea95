package main

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"universalcontroller.dev/uc/applier"
	"universalcontroller.dev/uc/schemas/bus"
)

// applyMetrics count how the applier's applies end (applier.Observer),
// and time the user's wait: from the watcher's observation of a parent to
// its reply applied.
type applyMetrics struct {
	applies  *prometheus.CounterVec
	rejected *prometheus.CounterVec
	latency  *prometheus.HistogramVec
}

func newApplyMetrics() applyMetrics {
	return applyMetrics{
		applies: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "uc_applies_total",
			Help: "Applies of hook replies, by controller, hook and result: applied, rejected (nothing of the reply applied; see uc_replies_rejected_total) or failed (retried).",
		}, []string{"controller", "hook", "result"}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "uc_replies_rejected_total",
			Help: "Hook replies the applier rejected whole, by controller, hook and reason, the reason of the Warning Event on the parent: InvalidHookReply, ApplyFailed, HookFailed (the hook's failure report), …",
		}, []string{"controller", "hook", "reason"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "uc_observation_to_applied_seconds",
			Help:    "Time from the watcher's observation of a parent (the ucobserved time its request carries) until the applier wrote its hook's reply: children, status and finalizer.",
			Buckets: latencyBuckets,
		}, []string{"controller", "hook"}),
	}
}

func (am applyMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{am.applies, am.rejected, am.latency}
}

func (am applyMetrics) Applied(m bus.Meta) {
	am.applies.WithLabelValues(m.Controller, m.Hook, "applied").Inc()
	if !m.Observed.IsZero() {
		am.latency.WithLabelValues(m.Controller, m.Hook).Observe(max(time.Since(m.Observed).Seconds(), 0))
	}
}

func (am applyMetrics) Rejected(m bus.Meta, reason string) {
	am.applies.WithLabelValues(m.Controller, m.Hook, "rejected").Inc()
	am.rejected.WithLabelValues(m.Controller, m.Hook, reason).Inc()
}

func (am applyMetrics) Failed(m bus.Meta) {
	am.applies.WithLabelValues(m.Controller, m.Hook, "failed").Inc()
}

// applierCollector reports, on every scrape, what one applier replica
// holds: the parents it knows in each partition it holds, and the
// rollouts in progress there.
type applierCollector struct{ a applierState }

// applierState is what the applier tells of what it holds;
// *applier.Applier does.
type applierState interface {
	PartitionParents() map[int]int
	Rollouts() map[string]applier.Rollouts
}

var (
	partitionParentsDesc = prometheus.NewDesc("uc_applier_partition_parents",
		"Parents this applier replica knows in each partition it holds: those it applied, or read the fence of, since it took the partition.", []string{"partition"}, nil)
	rolloutParentsDesc = prometheus.NewDesc("uc_rollout_parents",
		"Parents, in the partitions this replica holds, whose children are not all on their latest revision: rollouts in progress, by controller.", []string{"controller"}, nil)
	rolloutChildrenDesc = prometheus.NewDesc("uc_rollout_children",
		"Children of the rollouts in progress, by controller and revision: on the latest revision (moved) or on an older one (still to move). latest / (latest + older) is the rollouts' progress.", []string{"controller", "revision"}, nil)
)

func (c applierCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- partitionParentsDesc
	ch <- rolloutParentsDesc
	ch <- rolloutChildrenDesc
}

func (c applierCollector) Collect(ch chan<- prometheus.Metric) {
	for n, parents := range c.a.PartitionParents() {
		ch <- prometheus.MustNewConstMetric(partitionParentsDesc, prometheus.GaugeValue, float64(parents), strconv.Itoa(n))
	}
	for controller, r := range c.a.Rollouts() {
		ch <- prometheus.MustNewConstMetric(rolloutParentsDesc, prometheus.GaugeValue, float64(r.Parents), controller)
		ch <- prometheus.MustNewConstMetric(rolloutChildrenDesc, prometheus.GaugeValue, float64(r.Latest), controller, "latest")
		ch <- prometheus.MustNewConstMetric(rolloutChildrenDesc, prometheus.GaugeValue, float64(r.Older), controller, "older")
	}
}
