package otlp

import (
	"context"
	"fmt"
	"testing"

	"universalcontroller.dev/uc/internal/tracing/otlptest"
)

// TestNewProvider: spans go to the endpoint of the flag or of the standard
// variable, named after the role; with neither, nothing is recorded, but
// spans still have a trace context to pass on.
func TestNewProvider(t *testing.T) {
	for _, tc := range []struct {
		name      string
		flag, env bool
	}{
		{name: "flag", flag: true},
		{name: "OTEL_EXPORTER_OTLP_ENDPOINT", env: true},
		{name: "neither"},
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
			tp, err := NewProvider(ctx, endpoint, "uc-test", "v1.2.3")
			if err != nil {
				t.Fatal(err)
			}
			_, span := tp.Tracer("test").Start(ctx, "work")
			sc := span.SpanContext()
			span.End()
			if err := tp.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			if !sc.IsValid() {
				t.Fatalf("span without a trace context: %+v", sc)
			}
			exporting := tc.flag || tc.env
			if sc.IsSampled() != exporting {
				t.Errorf("sampled %t, want %t", sc.IsSampled(), exporting)
			}
			got := r.Spans()
			if !exporting {
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
