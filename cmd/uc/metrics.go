package main

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
	"k8s.io/component-base/metrics/legacyregistry"
	_ "k8s.io/component-base/metrics/prometheus/workqueue" // client-go's work queues report to legacyregistry

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
	calls     *prometheus.CounterVec
	callTime  *prometheus.HistogramVec
	replies   *prometheus.CounterVec
	roundTrip *prometheus.HistogramVec
	applies   applyMetrics
	shadows   shadowMetrics
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
			Buckets: latencyBuckets,
		}, []string{"controller", "hook"}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "uc_events_total",
			Help: "Kubernetes Events recorded, by type and reason: a Warning with reason InvalidReply or HookFailed is a rejected reply.",
		}, []string{"type", "reason"}),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "uc_hook_calls_total",
			Help: "Calls the dispatcher made to webhook and destination hooks, each try, by controller, hook and outcome: ok, timeout, http_4xx and the other status classes, unreachable, invalid_reply, invalid_config.",
		}, []string{"controller", "hook", "outcome"}),
		callTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "uc_hook_call_duration_seconds",
			Help:    "Time a call of a webhook or destination hook took, each try, whatever its outcome.",
			Buckets: latencyBuckets,
		}, []string{"controller", "hook"}),
		replies: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "uc_hook_replies_total",
			Help: "What hooks sent back, bus-native hooks included, counted where uc takes it from the bus, by controller, hook, outcome and reason: ok (a reply), failed (a call failed and is retried) or dead_lettered (the last try failed), the reason the worker gave (Timeout, HTTPError, InvalidReply, WorkerError).",
		}, []string{"controller", "hook", "outcome", "reason"}),
		roundTrip: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "uc_hook_round_trip_seconds",
			Help:    "Time from the watcher's observation of a parent to its hook's reply reaching uc: waiting on the bus, and the hook's call, for every hook, bus-native included.",
			Buckets: latencyBuckets,
		}, []string{"controller", "hook"}),
		applies: newApplyMetrics(),
		shadows: newShadowMetrics(),
	}
	m.reg.MustRegister(m.applies.collectors()...)
	m.reg.MustRegister(m.shadows.collectors()...)
	m.reg.MustRegister(m.requests, m.settled, m.settle, m.events, m.calls, m.callTime, m.replies, m.roundTrip, recovery.Panics,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// Every component's count is served from the start, 0 until a panic, so
	// an alert on its increase sees the first one.
	for _, c := range []string{recovery.Watcher, recovery.Applier, recovery.Hook} {
		recovery.Panics.WithLabelValues(c)
	}
	return m
}

// latencyBuckets are the buckets of uc's latencies, from 5ms to 82s.
var latencyBuckets = prometheus.ExponentialBuckets(0.005, 2, 15)

// HookCalled counts and times a call of a webhook or destination hook
// (dispatcher.CallObserver).
func (m *metrics) HookCalled(controller, hook, outcome string, took time.Duration) {
	m.calls.WithLabelValues(controller, hook, outcome).Inc()
	m.callTime.WithLabelValues(controller, hook).Observe(took.Seconds())
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

// Messages is the consumer's iterator (topology.KeptConsumer reads
// replies with it), each message it hands out observed.
func (c observedConsumer) Messages(opts ...jetstream.PullMessagesOpt) (jetstream.MessagesContext, error) {
	msgs, err := c.Consumer.Messages(opts...)
	if err != nil {
		return nil, err
	}
	return observedMessages{msgs, c.m}, nil
}

type observedMessages struct {
	jetstream.MessagesContext
	m *metrics
}

func (o observedMessages) Next(opts ...jetstream.NextOpt) (jetstream.Msg, error) {
	msg, err := o.MessagesContext.Next(opts...)
	if err != nil {
		return msg, err
	}
	o.m.replyReceived(msg)
	return &observedMsg{Msg: msg, m: o.m, delivered: time.Now()}, nil
}

// replyReceived counts a hook's reply, or the report of its failure, at
// its first delivery to uc, and times a reply from the watcher's
// observation (the event's ucobserved time). It reads the
// CloudEvent's headers only; the data of a failure report, to tell why.
func (m *metrics) replyReceived(msg jetstream.Msg) {
	if md, err := msg.Metadata(); err != nil || md.NumDelivered > 1 {
		return
	}
	controller, hook := subjectLabels(msg.Subject())
	header := msg.Headers()
	switch header.Get(ceHeader + "type") {
	case bus.ResponseType(hook):
		m.replies.WithLabelValues(controller, hook, "ok", "").Inc()
		if at := bus.ObservedAt(header.Get(ceHeader + bus.ExtObserved)); !at.IsZero() {
			m.roundTrip.WithLabelValues(controller, hook).Observe(max(time.Since(at).Seconds(), 0))
		}
	case bus.FailureType(hook):
		var f bus.Failure
		if json.Unmarshal(msg.Data(), &f) != nil || f.Deliveries == 0 {
			return // a failure the watcher found, not the hook's
		}
		outcome := "dead_lettered"
		if f.Retrying {
			outcome = "failed"
		}
		m.replies.WithLabelValues(controller, hook, outcome, f.Reason).Inc()
	}
}

// ceHeader prefixes a CloudEvent's attributes among a NATS message's
// headers (binary mode).
const ceHeader = "ce-"

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

// workqueueMetrics are client-go's work queue metrics (workqueue_depth,
// workqueue_adds_total, … by queue name: the watcher's "parents", the
// applier's "replies", the registry's "universalcontrollers"), as
// Kubernetes' own controllers export them: component-base's provider,
// which its package's init sets as client-go's before any queue is made.
// That provider registers its metrics in component-base's global
// legacyregistry, which also holds a Go and a process collector and its
// own meta metrics: only the workqueue_* families of it are served, next
// to uc's registry, so nothing is served twice nor from elsewhere.
var workqueueMetrics = prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
	mfs, err := legacyregistry.DefaultGatherer.Gather()
	return slices.DeleteFunc(mfs, func(mf *dto.MetricFamily) bool {
		return !strings.HasPrefix(mf.GetName(), "workqueue_")
	}), err
})

// gatherer is every metric served on /metrics: uc's and the work queues'.
func (m *metrics) gatherer() prometheus.Gatherer {
	return prometheus.Gatherers{m.reg, workqueueMetrics}
}
