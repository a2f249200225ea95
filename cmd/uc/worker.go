package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"universalcontroller.dev/uc/internal/exechook"
	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/sdk/go/hook"
)

// workerConfig is what `uc worker` is told.
type workerConfig struct {
	controller  string
	hookList    string
	hooks       []string
	argv        []string
	concurrency int
	timeout     time.Duration
	maxReply    int64
	nats        bus.Connection
	log         logOptions
	tracing     tracingOptions
}

func workerCommand() *cobra.Command { return newWorkerCommand(serveWorker) }

// newWorkerCommand is `uc worker`, serving with serve once its command line
// is checked.
func newWorkerCommand(serve func(context.Context, workerConfig, *slog.Logger) error) *cobra.Command {
	var cfg workerConfig
	c := &cobra.Command{
		Use:   "worker --controller NAME [--hook sync|finalize|customize|sync-shadow] [flags] -- COMMAND [ARGS...]",
		Short: "Serve a controller's hook on the bus by running a command once per request",
		Long: `Serves a controller's hook on the bus by running COMMAND once per request:
the request JSON (Metacontroller's, as a webhook gets it) on its standard
input, the reply JSON read from its standard output, its standard error
logged. A non-zero exit, a run longer than the timeout (the command and its
process group are killed) or a reply larger than --max-reply-bytes fails
the call, which is retried, then dead-lettered, and reported on the
parent. Exit status 75 asks uc to call again later: after the seconds
written on standard output, for this parent only. Run more uc worker
processes to serve more requests at once.`,
		Example: `  # against uc run on this machine
  uc worker --controller website-controller -- python3 examples/python-worker/hook.py

  # a shell and jq hook serving a decorator's sync and finalize hooks
  uc worker --controller ucd=pod-labels --hook sync,finalize -- sh hook.sh

  # a new version of a hook as the sync hook's shadow (spec.hooks.sync.shadow): never applied, compared
  uc worker --controller website-controller --hook sync-shadow -- python3 hook-v2.py`,
		Args: cobra.ArbitraryArgs, // the command and its arguments: complete checks there is one
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := cfg.complete(args); err != nil {
				return err
			}
			log, err := cfg.log.logger(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			log = log.With("command", strings.Join(cfg.argv, " "))
			if err := serve(cmd.Context(), cfg, log); err != nil {
				log.Error("worker stopped", "controller", cfg.controller, "err", err)
				return errLogged
			}
			return nil
		},
	}
	// The command's own arguments are not uc's flags.
	c.Flags().SetInterspersed(false)
	fs := c.Flags()
	fs.StringVar(&cfg.controller, "controller", "", "name of the UniversalController whose hook is served (a UniversalDecorator's: ucd=NAME)")
	fs.StringVar(&cfg.hookList, "hook", hooks.Sync, "the hook served: sync, finalize, customize, or sync-shadow (the sync hook's shadow); a comma-separated list serves each with the command (sync,finalize)")
	fs.IntVar(&cfg.concurrency, "concurrency", 16, "requests served at once per hook, each by a run of the command")
	fs.DurationVar(&cfg.timeout, "timeout", hook.DefaultPolicy.Timeout, "how long one run may take when the controller's delivery.timeout is not set; the command is killed then")
	fs.Int64Var(&cfg.maxReply, "max-reply-bytes", exechook.DefaultMaxReplyBytes, "largest reply taken from the command's standard output; a command that writes more is killed (keep it at most the NATS server's max_payload)")
	fs.StringVar(&cfg.nats.URL, "nats-url", nats.DefaultURL, "NATS server URL (uc run's embedded server listens on 127.0.0.1:4222)")
	natsFlags := flag.NewFlagSet("nats", flag.ContinueOnError)
	cfg.nats.RegisterFlags(natsFlags, func(string) string { return "" })
	fs.AddGoFlagSet(natsFlags)
	cfg.log.register(fs)
	cfg.tracing.register(fs)
	return c
}

// complete takes the command after the flags, and checks the config.
func (cfg *workerConfig) complete(args []string) error {
	cfg.argv = args
	cfg.hooks = strings.Split(cfg.hookList, ",")
	switch {
	case cfg.controller == "":
		return errors.New("--controller is needed")
	case len(cfg.argv) == 0:
		return errors.New("no command: give it after --, e.g. uc worker --controller NAME -- python3 hook.py")
	case cfg.concurrency < 1:
		return fmt.Errorf("--concurrency %d: at least 1", cfg.concurrency)
	case cfg.timeout <= 0:
		return fmt.Errorf("--timeout %s: must be positive", cfg.timeout)
	}
	for _, h := range cfg.hooks {
		if !slices.Contains([]string{hooks.Sync, hooks.Finalize, hooks.Customize, hooks.SyncShadow}, h) {
			return fmt.Errorf("--hook %q: sync, finalize, customize or sync-shadow", h)
		}
	}
	_, err := exec.LookPath(cfg.argv[0])
	return err
}

// serveWorker serves the config's hooks on the bus, each request by a run
// of its command, with the Go SDK's delivery.
func serveWorker(ctx context.Context, cfg workerConfig, log *slog.Logger) error {
	tracers := newTracers(cfg.tracing, log)
	defer tracers.shutdown(ctx)
	tp, err := tracers.provider(ctx, "worker")
	if err != nil {
		return err
	}
	var handlers []hook.Handler
	for _, h := range cfg.hooks {
		handlers = append(handlers, &exechook.Handler{HookName: h, Argv: cfg.argv, MaxReplyBytes: cfg.maxReply})
	}
	return hook.Run(ctx, cfg.nats, cfg.controller, handlers,
		hook.WithConcurrency(cfg.concurrency), hook.WithTimeout(cfg.timeout), hook.WithLogger(log), hook.WithTracerProvider(tp))
}
