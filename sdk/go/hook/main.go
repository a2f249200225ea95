package hook

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"universalcontroller.dev/uc/schemas/bus"
)

// Main is a hook worker's whole main function: it connects to NATS, serves
// the handlers until SIGINT or SIGTERM, then drains and exits. Flags, each
// also an environment variable: --nats-url ($NATS_URL, default
// nats://127.0.0.1:4222), --nats-creds ($NATS_CREDS), --nats-user
// ($NATS_USER), --nats-password ($NATS_PASSWORD), --nats-token
// ($NATS_TOKEN), --nats-tls-ca ($NATS_TLS_CA), --nats-tls-cert
// ($NATS_TLS_CERT), --nats-tls-key ($NATS_TLS_KEY).
//
// Run as an exec hook ($UC_EXEC_HOOK set, see ExecHookEnv), it serves
// one request instead, without NATS: the request JSON on its standard
// input, the reply JSON on its standard output; a failed call exits 1,
// saying why on its standard error.
func Main(controller string, handlers ...Handler) {
	var conn bus.Connection
	flag.StringVar(&conn.URL, "nats-url", envOr("NATS_URL", nats.DefaultURL), "NATS server URL")
	conn.RegisterFlags(flag.CommandLine, func(name string) string {
		return os.Getenv(strings.ToUpper(strings.ReplaceAll(name, "-", "_")))
	})
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if hook := os.Getenv(ExecHookEnv); hook != "" {
		if err := serveOne(ctx, hook, handlers, os.Stdin, os.Stdout); err != nil {
			log.Error("hook failed", "controller", controller, "hook", hook, "err", err)
			os.Exit(1)
		}
		return
	}
	if err := Run(ctx, conn, controller, handlers, WithLogger(log)); err != nil {
		log.Error("worker stopped", "controller", controller, "err", err)
		os.Exit(1)
	}
}

// Run connects to NATS and serves the handlers until ctx ends. Responses
// come to the controller's own inbox prefix (bus.HookInbox) unless
// conn sets one. It stops with an error when the server refuses an
// operation: a worker whose NATS user may not serve this controller
// cannot do its work, and when the connection closes for good
// (bus.UntilClosed).
func Run(ctx context.Context, conn bus.Connection, controller string, handlers []Handler, opts ...Option) error {
	o := options{log: slog.Default()}
	for _, opt := range opts {
		opt(&o)
	}
	if conn.InboxPrefix == "" {
		conn.InboxPrefix = bus.HookInbox(controller)
	}
	ctx, refuse := context.WithCancelCause(ctx)
	defer refuse(nil)
	nc, err := conn.Connect("uc-worker-"+controller, o.log, func(err error) {
		if errors.Is(err, nats.ErrPermissionViolation) {
			refuse(fmt.Errorf("NATS user %q may not serve controller %s: %w", conn.User, controller, err))
		}
	})
	if err != nil {
		return err
	}
	defer func() {
		refuse(nil) // before the close it asks for
		nc.Drain()
	}()
	untilClosed := bus.UntilClosed(nc)
	go func() {
		if err := untilClosed(ctx); err != nil {
			o.log.Error("NATS connection lost for good", "controller", controller, "err", err)
			refuse(err)
		}
	}()
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
	if cause := context.Cause(ctx); first == nil && (errors.Is(cause, nats.ErrPermissionViolation) || errors.Is(cause, nats.ErrConnectionClosed)) {
		return cause
	}
	return first
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
