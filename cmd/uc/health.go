package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/kubernetes"
)

// readyCheck is one condition of readiness: nil when met.
type readyCheck struct {
	name string
	fn   func(context.Context) error
}

// serveHealth serves /healthz (the process runs) and /readyz (every check
// passes) on addr until ctx ends. /readyz names the checks that fail.
func serveHealth(addr string, checks []readyCheck, log *slog.Logger) func(context.Context) error {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
		defer cancel()
		var failed []string
		for _, c := range checks {
			if err := c.fn(ctx); err != nil {
				failed = append(failed, c.name+": "+err.Error())
			}
		}
		if len(failed) > 0 {
			http.Error(w, "not ready:\n"+strings.Join(failed, "\n"), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	return func(ctx context.Context) error { return serveHTTP(ctx, addr, "--health-addr", mux, nil, log) }
}

// serveMetrics serves m on --metrics-addr at /metrics, and with
// --profiling Go's profiles at /debug/pprof/, until ctx ends: in plain
// HTTP, or with --metrics-secure over HTTPS to the clients the API server
// of kube authorizes (withKubernetesAuth).
func serveMetrics(cfg config, m *metrics, kube kubernetes.Interface, log *slog.Logger) (func(context.Context) error, error) {
	mux := m.handler()
	if cfg.profiling {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	var h http.Handler = mux
	var tlsCfg *tls.Config
	if cfg.metricsSecure {
		var err error
		if tlsCfg, err = metricsTLS(cfg.metricsCertDir, log); err != nil {
			return nil, err
		}
		if h, err = withKubernetesAuth(kube, mux, log); err != nil {
			return nil, err
		}
	}
	return func(ctx context.Context) error {
		return serveHTTP(ctx, cfg.metricsAddr, "--metrics-addr", h, tlsCfg, log)
	}, nil
}

// handler serves the metrics on /metrics in Prometheus' text format.
func (m *metrics) handler() *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.gatherer(), promhttp.HandlerOpts{Registry: m.reg}))
	return mux
}

// serveHTTP serves h on addr, given by flag, until ctx ends, over TLS when
// tlsCfg is set. It logs the address it listens on: with port 0, a free
// port.
func serveHTTP(ctx context.Context, addr, flag string, h http.Handler, tlsCfg *tls.Config, log *slog.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("%s: %w", flag, err)
	}
	scheme := "http"
	if tlsCfg != nil {
		ln, scheme = tls.NewListener(ln, tlsCfg), "https"
	}
	log.Info("serving", "flag", flag, "addr", ln.Addr().String(), "scheme", scheme)
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("%s: %w", flag, err)
	}
	return nil
}
