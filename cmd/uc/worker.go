package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"universalcontroller.dev/uc/dispatcher/worker"
	"universalcontroller.dev/uc/dispatcher/worker/exechook"
	"universalcontroller.dev/uc/schemas/hooks"
)

// workerConfig is what `uc worker` is told.
type workerConfig struct {
	controller  string
	hooks       []string
	argv        []string
	concurrency int
	timeout     time.Duration
	maxReply    int64
	nats        worker.Connection
	logLevel    string
}

// workerMain runs `uc worker`: one controller's hook served on the bus by
// running a command once per request, with the Go SDK's delivery. It
// returns the exit status.
func workerMain(args []string) int {
	cfg, err := parseWorker(args)
	if err != nil {
		fmt.Fprintln(os.Stderr, "uc worker:", err)
		return 2
	}
	log := newLogger(cfg.logLevel).With("command", strings.Join(cfg.argv, " "))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var handlers []worker.Handler
	for _, h := range cfg.hooks {
		handlers = append(handlers, &exechook.Handler{HookName: h, Argv: cfg.argv, MaxReplyBytes: cfg.maxReply})
	}
	err = worker.Run(ctx, cfg.nats, cfg.controller, handlers,
		worker.WithConcurrency(cfg.concurrency), worker.WithTimeout(cfg.timeout), worker.WithLogger(log))
	if err != nil {
		log.Error("worker stopped", "controller", cfg.controller, "err", err)
		return 1
	}
	return 0
}

// parseWorker reads the flags (and UC_* variables) and the command after
// them, and checks them.
func parseWorker(args []string) (workerConfig, error) {
	var cfg workerConfig
	fs := flag.NewFlagSet("uc worker", flag.ExitOnError)
	fs.StringVar(&cfg.controller, "controller", "", "name of the UniversalController whose hook is served (a UniversalDecorator's: ucd=NAME)")
	hookList := fs.String("hook", hooks.Sync, "the hook served: sync, finalize or customize; a comma-separated list serves each with the command (sync,finalize)")
	fs.IntVar(&cfg.concurrency, "concurrency", 16, "requests served at once per hook, each by a run of the command")
	fs.DurationVar(&cfg.timeout, "timeout", worker.DefaultPolicy.Timeout, "how long one run may take when the controller's delivery.timeout is not set; the command is killed then")
	fs.Int64Var(&cfg.maxReply, "max-reply-bytes", exechook.DefaultMaxReplyBytes, "largest reply taken from the command's standard output; a command that writes more is killed (keep it at most the NATS server's max_payload)")
	fs.StringVar(&cfg.nats.URL, "nats-url", nats.DefaultURL, "NATS server URL (uc run's embedded server listens on 127.0.0.1:4222)")
	cfg.nats.RegisterFlags(fs, func(string) string { return "" })
	fs.StringVar(&cfg.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: uc worker --controller NAME [--hook sync|finalize|customize] [flags] -- COMMAND [ARGS...]

Serves a controller's hook on the bus by running COMMAND once per request:
the request JSON (Metacontroller's, as a webhook gets it) on its standard
input, the reply JSON read from its standard output, its standard error
logged. A non-zero exit, a run longer than the timeout (the command and its
process group are killed) or a reply larger than --max-reply-bytes fails
the call, which is retried, then dead-lettered, and reported on the
parent. Exit status 75 asks uc to call again later: after the seconds
written on standard output, for this parent only. Run more uc worker
processes to serve more requests at once.

Example, against uc run on this machine:
  uc worker --controller website-controller -- python3 examples/python-worker/hook.py

Flags (each also a variable: --nats-url is UC_NATS_URL):
`)
		fs.PrintDefaults()
	}
	if err := parse(fs, args); err != nil {
		return cfg, err
	}
	cfg.argv = fs.Args()
	cfg.hooks = strings.Split(*hookList, ",")
	switch {
	case cfg.controller == "":
		return cfg, errors.New("--controller is needed")
	case len(cfg.argv) == 0:
		return cfg, errors.New("no command: give it after --, e.g. uc worker --controller NAME -- python3 hook.py")
	case cfg.concurrency < 1:
		return cfg, fmt.Errorf("--concurrency %d: at least 1", cfg.concurrency)
	case cfg.timeout <= 0:
		return cfg, fmt.Errorf("--timeout %s: must be positive", cfg.timeout)
	}
	for _, h := range cfg.hooks {
		if !slices.Contains([]string{hooks.Sync, hooks.Finalize, hooks.Customize}, h) {
			return cfg, fmt.Errorf("--hook %q: sync, finalize or customize", h)
		}
	}
	if _, err := exec.LookPath(cfg.argv[0]); err != nil {
		return cfg, err
	}
	return cfg, nil
}
