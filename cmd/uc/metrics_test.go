package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"universalcontroller.dev/uc/internal/bustest"
	"universalcontroller.dev/uc/internal/topology"
	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
)

// TestMetrics publishes a request and settles replies and failure reports through the
// observed JetStream of an embedded NATS server, records an Event and
// fills a work queue, then scrapes /metrics.
func TestMetrics(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	raw := bustest.JetStream(t)
	m := newMetrics()
	js := observedJetStream{raw, m}

	addr := bus.Address{Controller: "foo.example.com", Hook: "sync", Partition: 3, ParentUID: "uid-1"}
	for range 2 {
		if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: addr.RequestSubject(), Data: []byte("{}")}); err != nil {
			t.Fatal(err)
		}
	}
	// A reply observed 2s ago, the reports of a failed call and of a
	// dead-lettered request, and a failure the watcher found (not counted).
	meta := bus.Meta{Address: addr, Name: "a", Observation: 7, Observed: time.Now().Add(-2 * time.Second)}
	replies := []struct {
		typ  string
		data any
	}{
		{bus.ResponseType("sync"), hooks.SyncResponse{}},
		{bus.FailureType("sync"), bus.Failure{Reason: "Timeout", Deliveries: 1, Retrying: true}},
		{bus.FailureType("sync"), bus.Failure{Reason: "WorkerError", Deliveries: 5}},
		{bus.FailureType("sync"), bus.Failure{Reason: "InvalidSelector"}},
	}
	for i, r := range replies {
		e := event.New()
		e.SetID(fmt.Sprint(i))
		e.SetType(r.typ)
		e.SetSource("test")
		meta.SetOn(&e)
		if err := e.SetData(event.ApplicationJSON, r.data); err != nil {
			t.Fatal(err)
		}
		msg, err := bus.ToMsg(ctx, addr.ReplySubject(), &e)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := js.PublishMsg(ctx, msg); err != nil {
			t.Fatal(err)
		}
	}
	// Consumed as the applier consumes its partitions.
	acked := make(chan error, len(replies))
	kept, err := topology.KeepConsuming(ctx, js, topology.ApplierConsumer(3), func(msg jetstream.Msg) { acked <- msg.Ack() }, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer kept.Stop()
	for range replies {
		select {
		case err := <-acked:
			if err != nil {
				t.Fatal(err)
			}
		case <-ctx.Done():
			t.Fatal("replies not consumed")
		}
	}

	m.HookCalled("foo.example.com", "sync", "http_5xx", 30*time.Millisecond)
	observedRecorder{record.NewFakeRecorder(10), m}.Event(&corev1.Pod{}, "Warning", "InvalidReply", "bad")
	queue := workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[string]{Name: "parents"})
	defer queue.ShutDown()
	queue.Add("a")
	queue.Add("b")

	body := scrape(t, m)
	expectMetrics(t, body,
		`uc_hook_requests_published_total{controller="foo.example.com",hook="sync"} 2`,
		`uc_replies_settled_total{controller="foo.example.com",hook="sync",outcome="acked"} 4`,
		`uc_reply_apply_seconds_count{controller="foo.example.com",hook="sync"} 4`,
		`uc_hook_replies_total{controller="foo.example.com",hook="sync",outcome="ok",reason=""} 1`,
		`uc_hook_replies_total{controller="foo.example.com",hook="sync",outcome="failed",reason="Timeout"} 1`,
		`uc_hook_replies_total{controller="foo.example.com",hook="sync",outcome="dead_lettered",reason="WorkerError"} 1`,
		`uc_hook_round_trip_seconds_bucket{controller="foo.example.com",hook="sync",le="1.28"} 0`,
		`uc_hook_round_trip_seconds_bucket{controller="foo.example.com",hook="sync",le="2.56"} 1`,
		`uc_events_total{reason="InvalidReply",type="Warning"} 1`,
		`uc_hook_calls_total{controller="foo.example.com",hook="sync",outcome="http_5xx"} 1`,
		`uc_hook_call_duration_seconds_bucket{controller="foo.example.com",hook="sync",le="0.04"} 1`,
		`workqueue_depth{name="parents"} 2`,
		`uc_panics_total{component="applier"} 0`, // served before the first panic
		`# TYPE go_goroutines gauge`,
	)
	// A failure the watcher found is not the hook's; component-base's
	// global registry serves its work queue metrics only, not its own meta
	// metrics nor a second Go collector.
	for _, unwanted := range []string{"registered_metrics_total", "go_cpu_classes_", `reason="InvalidSelector"`} {
		if strings.Contains(body, unwanted) {
			t.Errorf("/metrics has %s", unwanted)
		}
	}
}

// scrape returns what m serves on /metrics.
func scrape(t *testing.T, m *metrics) string {
	t.Helper()
	srv := httptest.NewServer(m.handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %s, %v\n%s", resp.Status, err, body)
	}
	return string(body)
}

// expectMetrics fails the test unless body has every line.
func expectMetrics(t *testing.T, body string, lines ...string) {
	t.Helper()
	for _, want := range lines {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", body)
	}
}
