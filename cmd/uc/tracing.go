package main

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/spf13/pflag"
	"go.opentelemetry.io/otel/trace"

	"universalcontroller.dev/uc/internal/tracing/otlp"
)

// tracingOptions are the flags of where a command's spans go.
type tracingOptions struct {
	endpoint string
}

func (o *tracingOptions) register(fs *pflag.FlagSet) {
	fs.StringVar(&o.endpoint, "otlp-endpoint", "", "base URL of an OTLP/HTTP receiver the traces are exported to, e.g. http://otel-collector:4318 (spans go to its /v1/traces); default $OTEL_EXPORTER_OTLP_ENDPOINT, no export when neither is set")
}

// tracers makes a process's TracerProviders, one per role, each its own
// service (uc-watcher, uc-dispatcher, …), and shuts them down.
type tracers struct {
	endpoint  string
	log       *slog.Logger
	providers []otlp.Provider
}

// newTracers starts the tracing of a process: OpenTelemetry logs through
// log, and the process says where its spans go.
func newTracers(o tracingOptions, log *slog.Logger) *tracers {
	if otlp.Exporting(o.endpoint) {
		otlp.LogTo(log)
		endpoint := o.endpoint
		if endpoint == "" {
			endpoint = "from " + otlp.EnvEndpoints[0]
		}
		log.Info("exporting traces over OTLP/HTTP", "endpoint", endpoint)
	}
	return &tracers{endpoint: o.endpoint, log: log}
}

// provider is the TracerProvider of one role. The watcher starts the
// traces.
func (t *tracers) provider(ctx context.Context, role string) (trace.TracerProvider, error) {
	tp, err := otlp.NewProvider(ctx, t.endpoint, "uc-"+role, readVersion().version, role == "watcher")
	if err != nil {
		return nil, err
	}
	t.providers = append(t.providers, tp)
	return tp, nil
}

// shutdownTimeout bounds the export of the last spans when a process stops.
const shutdownTimeout = 5 * time.Second

// shutdown exports the spans still waiting in the providers' batches.
func (t *tracers) shutdown(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	var errs []error
	for _, tp := range t.providers {
		errs = append(errs, tp.Shutdown(ctx))
	}
	if err := errors.Join(errs...); err != nil {
		t.log.Warn("export the last spans", "err", err)
	}
}
