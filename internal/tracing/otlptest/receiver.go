// Package otlptest is an OTLP/HTTP trace receiver for tests: an HTTP server
// that decodes the spans exporters send it (protobuf, as
// go.opentelemetry.io/proto/otlp defines them) and keeps them, so a test
// can look at the traces uc's processes export without a collector.
package otlptest

import (
	"compress/gzip"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"

	collectorpb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Span is a received span, with what a test looks at.
type Span struct {
	Service  string // its resource's service.name
	Name     string
	TraceID  string // hex
	SpanID   string
	ParentID string // "" for a root span
	// Attributes are the span's attributes, their values as strings.
	Attributes map[string]string
	Links      []string // the span ids of its links
	StartNano  uint64
	EndNano    uint64
	Error      bool // its status is an error
}

// Receiver receives OTLP/HTTP trace exports on /v1/traces.
type Receiver struct {
	srv *httptest.Server

	mu    sync.Mutex
	spans []Span
}

// Start starts a receiver on a free port of the loopback interface. Close
// it.
func Start() *Receiver {
	r := &Receiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	return r
}

// Endpoint is the receiver's base URL, for OTEL_EXPORTER_OTLP_ENDPOINT.
func (r *Receiver) Endpoint() string { return r.srv.URL }

// Close stops the receiver.
func (r *Receiver) Close() { r.srv.Close() }

// Spans returns every span received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.spans)
}

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	if req.URL.Path != "/v1/traces" || req.Method != http.MethodPost {
		http.NotFound(w, req)
		return
	}
	spans, err := decode(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	r.spans = append(r.spans, spans...)
	r.mu.Unlock()
	out, err := proto.Marshal(&collectorpb.ExportTraceServiceResponse{})
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// decode reads the spans of one export request.
func decode(req *http.Request) ([]Span, error) {
	body := req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		gz, err := gzip.NewReader(req.Body)
		if err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		body = gz
	}
	b, err := io.ReadAll(body)
	if err != nil {
		return nil, err
	}
	var export collectorpb.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &export); err != nil {
		return nil, fmt.Errorf("not an OTLP trace export: %w", err)
	}
	var spans []Span
	for _, rs := range export.GetResourceSpans() {
		service := attributes(rs.GetResource().GetAttributes())["service.name"]
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				span := Span{Service: service, Name: s.GetName(),
					TraceID: hex.EncodeToString(s.GetTraceId()), SpanID: hex.EncodeToString(s.GetSpanId()),
					ParentID:   hex.EncodeToString(s.GetParentSpanId()),
					Attributes: attributes(s.GetAttributes()),
					StartNano:  s.GetStartTimeUnixNano(), EndNano: s.GetEndTimeUnixNano(),
					Error: s.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR}
				for _, l := range s.GetLinks() {
					span.Links = append(span.Links, hex.EncodeToString(l.GetSpanId()))
				}
				spans = append(spans, span)
			}
		}
	}
	return spans, nil
}

func attributes(kvs []*commonpb.KeyValue) map[string]string {
	out := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		v := kv.GetValue()
		switch v.GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			out[kv.GetKey()] = v.GetStringValue()
		case *commonpb.AnyValue_IntValue:
			out[kv.GetKey()] = fmt.Sprint(v.GetIntValue())
		case *commonpb.AnyValue_BoolValue:
			out[kv.GetKey()] = fmt.Sprint(v.GetBoolValue())
		default:
			out[kv.GetKey()] = v.String()
		}
	}
	return out
}

// Trace returns the spans of one trace, as received so far.
func (r *Receiver) Trace(traceID string) []Span {
	return slices.DeleteFunc(r.Spans(), func(s Span) bool { return s.TraceID != traceID })
}

// Connected checks that spans are one tree: a single root, and every other
// span's parent among them.
func Connected(spans []Span) error {
	ids := map[string]bool{}
	for _, s := range spans {
		ids[s.SpanID] = true
	}
	var roots []string
	for _, s := range spans {
		switch {
		case s.ParentID == "":
			roots = append(roots, s.Service+"/"+s.Name)
		case !ids[s.ParentID]:
			return fmt.Errorf("span %s/%s has a parent %s that is not in the trace", s.Service, s.Name, s.ParentID)
		}
	}
	if len(roots) != 1 {
		return fmt.Errorf("%d roots, want 1: %v", len(roots), roots)
	}
	return nil
}
