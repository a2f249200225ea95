package main

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"universalcontroller.dev/uc/internal/recovery"
	"universalcontroller.dev/uc/schemas/bus"
)

// metrics are uc's own Prometheus metrics, served on --metrics-addr. They
// are observed at the process's edges — what it publishes to and settles on
// the bus, the Events it records, its work queues — so that the roles'
// packages need no metrics code.
type metrics struct {
	reg       *prometheus.Registry
	requests  *prometheus.CounterVec
	settled   *prometheus.CounterVec
	settle    *prometheus.HistogramVec
	events    *prometheus.CounterVec
	workqueue queueMetrics
}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "uc_hook_requests_published_total",
			Help: "Hook requests published to the bus (the watcher), by controller and hook.",
		}, []string{"controller", "hook"}),
		settled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "uc_replies_settled_total",
			Help: "Hook replies taken from the bus, by controller, hook and outcome: acked (applied, or superseded by a newer reply), retried (given back), terminated.",
		}, []string{"controller", "hook", "outcome"}),
		settle: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "uc_reply_apply_seconds",
			Help:    "Time from a hook reply's delivery to this process until it is acked: waiting for the parent's other replies and its turn, and applying.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 14), // 5ms to 41s
		}, []string{"controller", "hook"}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "uc_events_total",
			Help: "Kubernetes Events recorded, by type and reason: a Warning with reason InvalidReply or HookFailed is a rejected reply.",
		}, []string{"type", "reason"}),
		workqueue: newQueueMetrics(),
	}
	m.reg.MustRegister(m.requests, m.settled, m.settle, m.events, recovery.Panics,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// Every component's count is served from the start, 0 until a panic, so
	// an alert on its increase sees the first one.
	for _, c := range []string{recovery.Watcher, recovery.Applier, recovery.Hook} {
		recovery.Panics.WithLabelValues(c)
	}
	m.workqueue.register(m.reg)
	return m
}

// subjectLabels are the controller (as written, with dots) and hook of a
// uc subject.
func subjectLabels(subject string) (controller, hook string) {
	parts := strings.SplitN(subject, ".", 5)
	if len(parts) < 4 {
		return "", ""
	}
	controller, _ = bus.ControllerOf(subject)
	return controller, parts[3]
}

// observedJetStream counts the hook requests published through it, and
// wraps the consumers of the reply stream made through it so that settling
// a reply is counted and timed.
type observedJetStream struct {
	jetstream.JetStream
	m *metrics
}

func (j observedJetStream) PublishMsg(ctx context.Context, msg *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	ack, err := j.JetStream.PublishMsg(ctx, msg, opts...)
	if err == nil && strings.HasPrefix(msg.Subject, bus.RequestPrefix+".") {
		j.m.requests.WithLabelValues(subjectLabels(msg.Subject)).Inc()
	}
	return ack, err
}

func (j observedJetStream) CreateOrUpdateConsumer(ctx context.Context, stream string, cfg jetstream.ConsumerConfig) (jetstream.Consumer, error) {
	c, err := j.JetStream.CreateOrUpdateConsumer(ctx, stream, cfg)
	if err != nil || stream != bus.ReplyStream {
		return c, err
	}
	return observedConsumer{c, j.m}, nil
}

type observedConsumer struct {
	jetstream.Consumer
	m *metrics
}

func (c observedConsumer) Consume(handler jetstream.MessageHandler, opts ...jetstream.PullConsumeOpt) (jetstream.ConsumeContext, error) {
	return c.Consumer.Consume(func(msg jetstream.Msg) {
		handler(&observedMsg{Msg: msg, m: c.m, delivered: time.Now()})
	}, opts...)
}

// observedMsg is a reply whose first settlement is counted.
type observedMsg struct {
	jetstream.Msg
	m         *metrics
	delivered time.Time
	once      sync.Once
}

func (o *observedMsg) settled(outcome string, err error) error {
	if err == nil {
		o.once.Do(func() {
			controller, hook := subjectLabels(o.Subject())
			o.m.settled.WithLabelValues(controller, hook, outcome).Inc()
			if outcome == "acked" {
				o.m.settle.WithLabelValues(controller, hook).Observe(time.Since(o.delivered).Seconds())
			}
		})
	}
	return err
}

func (o *observedMsg) Ack() error { return o.settled("acked", o.Msg.Ack()) }

func (o *observedMsg) DoubleAck(ctx context.Context) error {
	return o.settled("acked", o.Msg.DoubleAck(ctx))
}

func (o *observedMsg) Nak() error { return o.settled("retried", o.Msg.Nak()) }

func (o *observedMsg) NakWithDelay(d time.Duration) error {
	return o.settled("retried", o.Msg.NakWithDelay(d))
}

func (o *observedMsg) Term() error { return o.settled("terminated", o.Msg.Term()) }

func (o *observedMsg) TermWithReason(reason string) error {
	return o.settled("terminated", o.Msg.TermWithReason(reason))
}

// observedRecorder counts the Events recorded through it.
type observedRecorder struct {
	record.EventRecorder
	m *metrics
}

func (r observedRecorder) Event(obj runtime.Object, eventtype, reason, message string) {
	r.m.events.WithLabelValues(eventtype, reason).Inc()
	r.EventRecorder.Event(obj, eventtype, reason, message)
}

func (r observedRecorder) Eventf(obj runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	r.m.events.WithLabelValues(eventtype, reason).Inc()
	r.EventRecorder.Eventf(obj, eventtype, reason, messageFmt, args...)
}

func (r observedRecorder) AnnotatedEventf(obj runtime.Object, annotations map[string]string, eventtype, reason, messageFmt string, args ...any) {
	r.m.events.WithLabelValues(eventtype, reason).Inc()
	r.EventRecorder.AnnotatedEventf(obj, annotations, eventtype, reason, messageFmt, args...)
}

// queueMetrics are client-go's work queue metrics (workqueue_depth and
// the others Kubernetes' controllers export), by queue name: the watcher's
// "parents", the applier's "replies", the registry's
// "universalcontrollers".
type queueMetrics struct {
	depth, unfinished, longest *prometheus.GaugeVec
	adds, retries              *prometheus.CounterVec
	latency, duration          *prometheus.HistogramVec
}

func newQueueMetrics() queueMetrics {
	gauge := func(name, help string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Subsystem: "workqueue", Name: name, Help: help}, []string{"name"})
	}
	counter := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: "workqueue", Name: name, Help: help}, []string{"name"})
	}
	histogram := func(name, help string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Subsystem: "workqueue", Name: name, Help: help,
			Buckets: prometheus.ExponentialBuckets(10e-9, 10, 11)}, []string{"name"})
	}
	return queueMetrics{
		depth:      gauge("depth", "Current depth of the work queue."),
		unfinished: gauge("unfinished_work_seconds", "Seconds of work in progress not yet observed by work_duration."),
		longest:    gauge("longest_running_processor_seconds", "Seconds the longest running processor has been running."),
		adds:       counter("adds_total", "Adds handled by the work queue."),
		retries:    counter("retries_total", "Retries handled by the work queue."),
		latency:    histogram("queue_duration_seconds", "Seconds an item stays in the work queue before being taken."),
		duration:   histogram("work_duration_seconds", "Seconds processing an item takes."),
	}
}

func (q queueMetrics) register(reg *prometheus.Registry) {
	reg.MustRegister(q.depth, q.unfinished, q.longest, q.adds, q.retries, q.latency, q.duration)
}

func (q queueMetrics) NewDepthMetric(name string) workqueue.GaugeMetric {
	return q.depth.WithLabelValues(name)
}

func (q queueMetrics) NewAddsMetric(name string) workqueue.CounterMetric {
	return q.adds.WithLabelValues(name)
}

func (q queueMetrics) NewLatencyMetric(name string) workqueue.HistogramMetric {
	return q.latency.WithLabelValues(name)
}

func (q queueMetrics) NewWorkDurationMetric(name string) workqueue.HistogramMetric {
	return q.duration.WithLabelValues(name)
}

func (q queueMetrics) NewUnfinishedWorkSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return q.unfinished.WithLabelValues(name)
}

func (q queueMetrics) NewLongestRunningProcessorSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return q.longest.WithLabelValues(name)
}

func (q queueMetrics) NewRetriesMetric(name string) workqueue.CounterMetric {
	return q.retries.WithLabelValues(name)
}
