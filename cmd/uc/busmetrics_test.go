package main

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"universalcontroller.dev/uc/internal/bustest"
	"universalcontroller.dev/uc/internal/topology"
	"universalcontroller.dev/uc/schemas/bus"
)

// TestBusMetrics fills the streams of an embedded NATS server — three
// requests of which a worker took one, two dead letters of one hook, one
// of another — and scrapes the bus's gauges; a consumer that does not
// exist is counted as an error, not served.
func TestBusMetrics(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	js := bustest.JetStream(t)
	hook := topology.HookConsumer("foo.example.com", "sync")
	if _, err := js.CreateOrUpdateConsumer(ctx, hook.Stream, hook.Config); err != nil {
		t.Fatal(err)
	}
	publish := func(subject string) {
		t.Helper()
		if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: subject, Data: []byte("{}")}); err != nil {
			t.Fatal(err)
		}
	}
	for _, uid := range []string{"a", "b", "c"} {
		publish(bus.Address{Controller: "foo.example.com", Hook: "sync", ParentUID: k8stypes.UID("uid-" + uid)}.RequestSubject())
	}
	cons, err := js.Consumer(ctx, bus.RequestStream, bus.HookConsumer("foo.example.com", "sync"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cons.Next(); err != nil { // taken, not acknowledged
		t.Fatal(err)
	}
	for _, a := range []bus.Address{
		{Controller: "foo.example.com", Hook: "sync", Partition: 1, ParentUID: "uid-a"},
		{Controller: "foo.example.com", Hook: "sync", Partition: 2, ParentUID: "uid-b"},
		{Controller: "bar", Hook: "finalize", ParentUID: "uid-c"},
	} {
		publish(a.DeadLetterSubject())
	}

	m := newMetrics()
	m.reg.MustRegister(newBusCollector(js, topology.Streams, []func() []topology.Consumer{
		func() []topology.Consumer { return []topology.Consumer{hook} },
		func() []topology.Consumer { return []topology.Consumer{topology.ApplierConsumer(9)} }, // not there
	}, slog.Default()))
	expectMetrics(t, scrape(t, m),
		`uc_stream_messages{stream="UC_REQUESTS"} 3`,
		`uc_stream_messages{stream="UC_REPLIES"} 0`,
		`uc_stream_messages{stream="UC_DEADLETTER"} 3`,
		`uc_deadletter_messages{controller="foo.example.com",hook="sync"} 2`,
		`uc_deadletter_messages{controller="bar",hook="finalize"} 1`,
		`uc_consumer_pending_messages{consumer="hook_foo_example_com_sync",stream="UC_REQUESTS"} 2`,
		`uc_consumer_ack_pending_messages{consumer="hook_foo_example_com_sync",stream="UC_REQUESTS"} 1`,
		`uc_bus_info_errors_total 1`,
	)
}
