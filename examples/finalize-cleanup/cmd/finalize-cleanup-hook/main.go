// Command finalize-cleanup-hook serves the Registration controller's sync
// and finalize hooks on the bus, with the registry in a JetStream key-value
// bucket of the same NATS server.
package main

import (
	"context"
	"flag"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	finalizecleanup "universalcontroller.dev/uc/examples/finalize-cleanup"
	"universalcontroller.dev/uc/sdk/go/hook"
)

func main() {
	url := flag.String("nats-url", nats.DefaultURL, "NATS server URL")
	retry := flag.Float64("retry-after", 5, "seconds between finalize calls while the registry entry is still there")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *url, *retry, log); err != nil {
		log.Error("worker stopped", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, url string, retry float64, log *slog.Logger) error {
	nc, err := nats.Connect(url, nats.Name("uc-worker-"+finalizecleanup.Controller), nats.MaxReconnects(-1))
	if err != nil {
		return err
	}
	defer nc.Drain()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	store, err := finalizecleanup.OpenKVStore(ctx, js, finalizecleanup.Bucket)
	if err != nil {
		return err
	}
	h := &finalizecleanup.Hooks{Store: store, RetryAfterSeconds: retry}
	errs := make(chan error, 2)
	for _, handler := range []hook.Handler{hook.Sync(h.Sync), hook.Finalize(h.Finalize)} {
		go func() { errs <- hook.Serve(ctx, js, finalizecleanup.Controller, handler, hook.WithLogger(log)) }()
	}
	first := <-errs
	if second := <-errs; first == nil {
		first = second
	}
	return first
}
