package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"universalcontroller.dev/uc/internal/topology"
	"universalcontroller.dev/uc/schemas/bus"
)

// busCollector reports, on every scrape, the state of the bus as
// JetStream's stream and consumer info give it: the messages in each
// stream and the dead letters by controller and hook (the dispatcher, which
// owns the streams), and how far behind each consumer of the process's
// roles is. What the bus does not answer within busInfoTimeout is left out
// of the scrape and counted in uc_bus_info_errors_total.
type busCollector struct {
	js        jetstream.JetStream
	streams   []topology.Stream // reported, with the dead letters, when not empty
	consumers []func() []topology.Consumer
	errors    prometheus.Counter
	log       *slog.Logger
}

// busInfoTimeout bounds the bus's answers to one scrape, well within
// Prometheus' default scrape timeout (10s).
const busInfoTimeout = 5 * time.Second

var (
	streamMessagesDesc = prometheus.NewDesc("uc_stream_messages",
		"Messages held by each of uc's streams: requests waiting for or in a hook call (UC_REQUESTS), replies waiting for an applier (UC_REPLIES), dead letters (UC_DEADLETTER).", []string{"stream"}, nil)
	deadLettersDesc = prometheus.NewDesc("uc_deadletter_messages",
		"Dead letters by controller and hook: requests no hook could serve within their maximum deliveries, kept 7 days.", []string{"controller", "hook"}, nil)
	consumerPendingDesc = prometheus.NewDesc("uc_consumer_pending_messages",
		"Messages of its stream a consumer has not delivered yet (its lag), by stream and consumer: hook_<controller>_<hook> on UC_REQUESTS, applier_<partition> and watcher on UC_REPLIES.", []string{"stream", "consumer"}, nil)
	consumerAckPendingDesc = prometheus.NewDesc("uc_consumer_ack_pending_messages",
		"Messages a consumer delivered that are not acknowledged yet: requests in a hook call, replies waiting for or in an apply.", []string{"stream", "consumer"}, nil)
)

func newBusCollector(js jetstream.JetStream, streams []topology.Stream, consumers []func() []topology.Consumer, log *slog.Logger) *busCollector {
	return &busCollector{js: js, streams: streams, consumers: consumers, log: log,
		errors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "uc_bus_info_errors_total",
			Help: "Stream and consumer infos the bus did not give in time for a scrape: the gauges they hold are missing from that scrape.",
		})}
}

func (c *busCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- streamMessagesDesc
	ch <- deadLettersDesc
	ch <- consumerPendingDesc
	ch <- consumerAckPendingDesc
	c.errors.Describe(ch)
}

func (c *busCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), busInfoTimeout)
	defer cancel()
	for _, s := range c.streams {
		c.collect(ctx, s.Name, func() error { return c.collectStream(ctx, ch, s.Name) })
	}
	for _, needed := range c.consumers {
		for _, cons := range needed() {
			c.collect(ctx, cons.Name(), func() error { return c.collectConsumer(ctx, ch, cons.Stream, cons.Name()) })
		}
	}
	c.errors.Collect(ch)
}

// collect runs one info's collection, counting and logging its failure.
func (c *busCollector) collect(ctx context.Context, what string, fn func() error) {
	if err := fn(); err != nil {
		c.errors.Inc()
		c.log.Debug("bus info for metrics", "of", what, "err", err)
	}
}

func (c *busCollector) collectStream(ctx context.Context, ch chan<- prometheus.Metric, name string) error {
	var opts []jetstream.StreamInfoOpt
	if name == bus.DeadLetterStream { // by subject: by controller and hook
		opts = append(opts, jetstream.WithSubjectFilter(bus.DeadLetterPrefix+".>"))
	}
	s, err := c.js.Stream(ctx, name)
	var info *jetstream.StreamInfo
	if err == nil {
		info = s.CachedInfo()
		if len(opts) > 0 {
			info, err = s.Info(ctx, opts...)
		}
	}
	if err != nil {
		return fmt.Errorf("stream %s: %w", name, err)
	}
	ch <- prometheus.MustNewConstMetric(streamMessagesDesc, prometheus.GaugeValue, float64(info.State.Msgs), name)
	if name != bus.DeadLetterStream {
		return nil
	}
	type hookKey struct{ controller, hook string }
	dead := map[hookKey]uint64{}
	for subject, n := range info.State.Subjects {
		controller, hook := subjectLabels(subject)
		dead[hookKey{controller, hook}] += n
	}
	for k, n := range dead {
		ch <- prometheus.MustNewConstMetric(deadLettersDesc, prometheus.GaugeValue, float64(n), k.controller, k.hook)
	}
	return nil
}

func (c *busCollector) collectConsumer(ctx context.Context, ch chan<- prometheus.Metric, stream, name string) error {
	cons, err := c.js.Consumer(ctx, stream, name)
	if err != nil {
		return fmt.Errorf("consumer %s of %s: %w", name, stream, err)
	}
	info := cons.CachedInfo()
	ch <- prometheus.MustNewConstMetric(consumerPendingDesc, prometheus.GaugeValue, float64(info.NumPending), stream, name)
	ch <- prometheus.MustNewConstMetric(consumerAckPendingDesc, prometheus.GaugeValue, float64(info.NumAckPending), stream, name)
	return nil
}
