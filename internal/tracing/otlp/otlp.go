// Package otlp makes the TracerProviders of uc's processes: one per role,
// its service named after the role, exporting spans over OTLP/HTTP when an
// endpoint is configured. It is the one place that depends on the
// OpenTelemetry SDK and its exporter; the components make their spans with
// the API alone (see internal/tracing).
package otlp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// EnvEndpoints are the standard variables that name where spans go, the
// second for traces alone (OpenTelemetry's exporter configuration).
var EnvEndpoints = []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"}

// Exporting tells whether spans are exported: endpoint, or one of
// EnvEndpoints, is set.
func Exporting(endpoint string) bool {
	if endpoint != "" {
		return true
	}
	for _, v := range EnvEndpoints {
		if os.Getenv(v) != "" {
			return true
		}
	}
	return false
}

// Provider is a role's TracerProvider. Shut it down before the process
// exits, to send the last spans.
type Provider interface {
	trace.TracerProvider
	Shutdown(context.Context) error
}

// NewProvider returns the TracerProvider of one role of a process, whose
// spans name service and version as their service.
//
// When exporting (see Exporting), it sends its spans in batches over
// OTLP/HTTP (protobuf) to endpoint — a base URL, as
// OTEL_EXPORTER_OTLP_ENDPOINT: spans go to <endpoint>/v1/traces — or, when
// endpoint is empty, where the standard variables say; the exporter's other
// OTEL_EXPORTER_OTLP_* variables (headers, certificates, compression,
// timeout) and OTEL_TRACES_SAMPLER apply.
//
// Otherwise it records and exports nothing. The spans of a role that starts
// traces (the watcher) still get ids, so that every event on the bus
// carries a trace context, for a hook that traces; those of the others are
// the OpenTelemetry API's no-op, which cost next to nothing and pass on
// the trace context they are given.
func NewProvider(ctx context.Context, endpoint, service, version string, startsTraces bool) (Provider, error) {
	switch {
	case !Exporting(endpoint) && startsTraces:
		return sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample())), nil
	case !Exporting(endpoint):
		return noopProvider{}, nil
	}
	var opts []otlptracehttp.Option
	if endpoint != "" {
		u, err := url.JoinPath(endpoint, "v1/traces")
		if err != nil {
			return nil, fmt.Errorf("OTLP endpoint %q: %w", endpoint, err)
		}
		opts = append(opts, otlptracehttp.WithEndpointURL(u))
	}
	exporter, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("OTLP exporter: %w", err)
	}
	// The service is the role's, whatever OTEL_RESOURCE_ATTRIBUTES says:
	// uc run's roles are three services in one process.
	res, err := resource.New(ctx, resource.WithFromEnv(), resource.WithTelemetrySDK(), resource.WithHost(),
		resource.WithAttributes(semconv.ServiceName(service), semconv.ServiceVersion(version)))
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("OTLP resource: %w", err)
	}
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res)), nil
}

// noopProvider is the API's no-op TracerProvider, with nothing to shut
// down.
type noopProvider struct{ noop.TracerProvider }

func (noopProvider) Shutdown(context.Context) error { return nil }

// LogTo sends OpenTelemetry's own messages — an export that failed, above
// all — to log, so that a process writes one log format.
func LogTo(log *slog.Logger) {
	log = log.With("component", "tracing")
	otel.SetLogger(logr.FromSlogHandler(log.Handler()))
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn("OpenTelemetry", "err", err) }))
}
