package otlp

import (
	"context"
	"fmt"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"universalcontroller.dev/uc/internal/tracing/otlptest"
)

// TestNewProvider: spans go to the endpoint of the flag or of the standard
// variable, named after the role. With neither, nothing is recorded; the
// spans of a role that starts traces still have a trace context to pass
// on, and those of the others pass on the one they are given.
func TestNewProvider(t *testing.T) {
	parent := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1}, Remote: true})
	for _, tc := range []struct {
		name         string
		flag, env    bool
		startsTraces bool
		parent       trace.SpanContext
		wantSampled  bool
	}{
		{name: "flag", flag: true, wantSampled: true},
		{name: "OTEL_EXPORTER_OTLP_ENDPOINT", env: true, wantSampled: true},
		{name: "neither, starting traces", startsTraces: true},
		{name: "neither, continuing one", parent: parent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			r := otlptest.Start()
			defer r.Close()
			for _, v := range EnvEndpoints {
				t.Setenv(v, "")
			}
			endpoint := ""
			if tc.flag {
				endpoint = r.Endpoint()
			}
			if tc.env {
				t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", r.Endpoint())
			}
			tp, err := NewProvider(ctx, endpoint, "uc-test", "v1.2.3", tc.startsTraces)
			if err != nil {
				t.Fatal(err)
			}
			_, span := tp.Tracer("test").Start(trace.ContextWithRemoteSpanContext(ctx, tc.parent), "work")
			sc := span.SpanContext()
			span.End()
			if err := tp.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			switch {
			case !sc.IsValid():
				t.Fatalf("span without a trace context: %+v", sc)
			case tc.parent.IsValid() && sc.TraceID() != tc.parent.TraceID():
				t.Errorf("span in trace %s, want its parent's %s", sc.TraceID(), tc.parent.TraceID())
			case sc.IsSampled() != tc.wantSampled:
				t.Errorf("sampled %t, want %t", sc.IsSampled(), tc.wantSampled)
			}
			got := r.Spans()
			if !tc.wantSampled {
				if len(got) > 0 {
					t.Fatalf("exported %v with no endpoint", got)
				}
				return
			}
			if len(got) != 1 {
				t.Fatalf("received %d spans, want 1: %v", len(got), got)
			}
			want := fmt.Sprintf("uc-test work %s %s", sc.TraceID(), sc.SpanID())
			if s := got[0]; fmt.Sprintf("%s %s %s %s", s.Service, s.Name, s.TraceID, s.SpanID) != want {
				t.Errorf("received %+v, want %s", s, want)
			}
		})
	}
}
