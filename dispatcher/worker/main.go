package worker

import (
	"context"
	"flag"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Main is a hook worker's whole main function: it connects to NATS (flag
// --nats-url, or $NATS_URL, default nats://127.0.0.1:4222), serves the
// handlers until SIGINT or SIGTERM, then drains and exits.
func Main(controller string, handlers ...Handler) {
	url := flag.String("nats-url", envOr("NATS_URL", nats.DefaultURL), "NATS server URL")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := Run(ctx, *url, controller, handlers, WithLogger(log)); err != nil {
		log.Error("worker stopped", "controller", controller, "err", err)
		os.Exit(1)
	}
}

// Run connects to the NATS server at url and serves the handlers until ctx
// ends.
func Run(ctx context.Context, url, controller string, handlers []Handler, opts ...Option) error {
	nc, err := nats.Connect(url, nats.Name("uc-worker-"+controller), nats.MaxReconnects(-1))
	if err != nil {
		return err
	}
	defer nc.Drain()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	errs := make(chan error, len(handlers))
	for _, h := range handlers {
		go func() { errs <- Serve(ctx, js, controller, h, opts...) }()
	}
	var first error
	for range handlers {
		if err := <-errs; err != nil && first == nil && ctx.Err() == nil {
			first = err
		}
	}
	return first
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
