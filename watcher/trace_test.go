package watcher

import (
	"log/slog"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"universalcontroller.dev/uc/internal/bustest"
	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
)

// TestPublishCarriesTheTrace: each event a sync publishes carries the trace
// context of its own publish span, under the sync's span; an event the bus
// drops as a duplicate says so on its span.
func TestPublishCarriesTheTrace(t *testing.T) {
	js := bustest.JetStream(t)
	rec := tracetest.NewSpanRecorder()
	w := &Watcher{js: js, log: slog.Default(), tracer: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)).Tracer("test")}
	ctx, sync := w.tracer.Start(t.Context(), "sync")
	meta := bus.Meta{Address: bus.Address{Controller: "c", Hook: hooks.Sync, ParentUID: "u"}, Namespace: "ns", Name: "p"}
	for range 2 { // the same event twice: the second is a duplicate
		if err := w.publish(ctx, meta, bus.FailureType(hooks.Sync), meta.ReplySubject(), bus.Failure{Reason: "InvalidSelector"}, "id-1"); err != nil {
			t.Fatal(err)
		}
	}
	sync.End()
	stream, err := js.Stream(t.Context(), bus.ReplyStream)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := stream.GetLastMsgForSubject(t.Context(), meta.ReplySubject())
	if err != nil {
		t.Fatal(err)
	}
	e, err := bus.FromMsg(t.Context(), msg.Subject, msg.Header, msg.Data)
	if err != nil {
		t.Fatal(err)
	}
	sent := trace.SpanContextFromContext(bus.ExtractTrace(t.Context(), e))
	var publishes []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == "publish" {
			publishes = append(publishes, s)
		}
	}
	if len(publishes) != 2 {
		t.Fatalf("%d publish spans, want 2", len(publishes))
	}
	for i, p := range publishes {
		duplicate := false
		for _, kv := range p.Attributes() {
			duplicate = duplicate || kv.Key == "uc.duplicate" && kv.Value.AsBool()
		}
		switch {
		case p.Parent().SpanID() != sync.SpanContext().SpanID():
			t.Errorf("publish %d under %s, want the sync %s", i, p.Parent().SpanID(), sync.SpanContext().SpanID())
		case duplicate != (i == 1):
			t.Errorf("publish %d: duplicate %t", i, duplicate)
		}
	}
	if sent.SpanID() != publishes[0].SpanContext().SpanID() || sent.TraceID() != sync.SpanContext().TraceID() {
		t.Errorf("the event carries %s/%s, want the first publish's %s/%s", sent.TraceID(), sent.SpanID(), sync.SpanContext().TraceID(), publishes[0].SpanContext().SpanID())
	}
}
