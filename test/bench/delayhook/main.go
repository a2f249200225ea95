// Command delayhook serves the Fanout controller's sync hook for the bench's
// hook scaling (go run ./test/bench -scenario hooks). Each call waits
// --delay before it answers: the wait stands for the hook's own work, such
// as a call to another service, and takes no CPU. Each call answered is
// announced on core NATS (--calls-subject, data "namespace/name"), so that
// the bench counts the calls of hooks running in other processes as it
// counts its own.
//
// On the bus (the default) it is a bus-native worker serving --concurrency
// calls at once; with --listen it is a Metacontroller webhook instead, which
// uc's dispatcher calls (the dispatcher bounds the calls in flight).
//
//	delayhook --nats-url nats://127.0.0.1:4222 --controller fanout-controller --delay 100ms --concurrency 4
//	delayhook --nats-url nats://127.0.0.1:4222 --listen 127.0.0.1:8080
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"universalcontroller.dev/uc/examples/fanout"
	"universalcontroller.dev/uc/sdk/go/hook"
)

func main() {
	url := flag.String("nats-url", nats.DefaultURL, "uc's NATS server")
	controller := flag.String("controller", fanout.Controller, "the controller whose sync hook to serve on the bus")
	delay := flag.Duration("delay", 100*time.Millisecond, "how long each call waits before it answers")
	concurrency := flag.Int("concurrency", 16, "calls served at once on the bus")
	listen := flag.String("listen", "", "serve the hook as a webhook on this address instead of on the bus")
	subject := flag.String("calls-subject", "", "core NATS subject announcing each call answered (empty: none)")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *url, *controller, *listen, &delayHook{delay: *delay, subject: *subject}, *concurrency, log); err != nil {
		log.Error("delayhook stopped", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, url, controller, listen string, h *delayHook, concurrency int, log *slog.Logger) error {
	nc, err := nats.Connect(url, nats.MaxReconnects(-1))
	if err != nil {
		return fmt.Errorf("connect to %s: %w", url, err)
	}
	defer nc.Drain()
	h.nc = nc
	if listen != "" {
		return serveHTTP(ctx, listen, h)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	err = hook.Serve(ctx, js, controller, hook.Sync(h.sync), hook.WithConcurrency(concurrency), hook.WithLogger(log))
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// delayHook is the Fanout hook, slowed down and announced.
type delayHook struct {
	delay   time.Duration
	subject string
	nc      *nats.Conn
}

func (h *delayHook) sync(ctx context.Context, req *hook.SyncRequest) (*hook.SyncResponse, error) {
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(h.delay):
	}
	resp, err := fanout.Sync(ctx, req)
	if err == nil && h.subject != "" {
		err = h.nc.Publish(h.subject, []byte(req.Parent.GetNamespace()+"/"+req.Parent.GetName()))
	}
	return resp, err
}

// serveHTTP serves the hook as a Metacontroller webhook: the request is the
// POST's JSON body, the reply the 200 response's, until ctx ends.
func serveHTTP(ctx context.Context, addr string, h *delayHook) error {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /", func(w http.ResponseWriter, r *http.Request) {
		var req hook.SyncRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, fmt.Sprintf("decode request: %v", err), http.StatusBadRequest)
			return
		}
		resp, err := h.sync(r.Context(), &req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(resp)
	})
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Shutdown(context.WithoutCancel(ctx))
	}()
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
