package bus

import (
	"context"
	"testing"

	"github.com/cloudevents/sdk-go/v2/event"
	"go.opentelemetry.io/otel/trace"
)

// TestTraceCrossesTheBus: the span context an event is sent with comes out
// of the NATS message it travels in, as the remote parent of the receiver's
// span; an event without one leaves the receiver's context as it was.
func TestTraceCrossesTheBus(t *testing.T) {
	state, err := trace.ParseTraceState("vendor=value")
	if err != nil {
		t.Fatal(err)
	}
	sent := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:     trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
		TraceFlags: trace.FlagsSampled,
		TraceState: state,
	})
	unsampled := sent.WithTraceFlags(0).WithTraceState(trace.TraceState{})
	for _, tc := range []struct {
		name       string
		span       trace.SpanContext
		wantHeader string
	}{
		{"sampled, with a trace state", sent, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
		{"not sampled", unsampled, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"},
		{"no span", trace.SpanContext{}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := trace.ContextWithSpanContext(context.Background(), tc.span)
			e := event.New()
			e.SetID("id-1")
			e.SetType(RequestType("sync"))
			e.SetSource("/test")
			InjectTrace(ctx, &e)
			msg, err := ToMsg(ctx, "uc.req.c.sync.0.u", &e)
			if err != nil {
				t.Fatal(err)
			}
			if got := msg.Header.Get("ce-traceparent"); got != tc.wantHeader {
				t.Errorf("ce-traceparent %q, want %q", got, tc.wantHeader)
			}
			got, err := FromMsg(context.Background(), msg.Subject, msg.Header, msg.Data)
			if err != nil {
				t.Fatal(err)
			}
			received := trace.SpanContextFromContext(ExtractTrace(context.Background(), got))
			if want := tc.span.WithRemote(tc.span.IsValid()); !received.Equal(want) {
				t.Errorf("received span context %+v, want %+v", received, want)
			}
		})
	}
}
