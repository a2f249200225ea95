// Command uc is UniversalController: a declarative Kubernetes operator whose
// controllers are one UniversalController object and one hook each.
//
//	uc run          every role in one process, with an embedded NATS JetStream server
//	uc watcher      the watch core only, against an external NATS
//	uc dispatcher   the bus topology and non-bus hook delivery only
//	uc applier      the applier only
//	uc nats-config  prints the NATS users and permissions of uc's roles and hook workers
//
// Every flag can also be set as an environment variable: --nats-url is
// UC_NATS_URL.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	cmd := os.Args[1]
	if cmd == "worker" {
		os.Exit(workerMain(os.Args[2:]))
	}
	if cmd == "nats-config" {
		if err := natsConfig(os.Args[2:], os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		return
	}
	roles, ok := map[string]roleSet{
		"run":        {watcher: true, dispatcher: true, applier: true},
		"watcher":    {watcher: true},
		"dispatcher": {dispatcher: true},
		"applier":    {applier: true},
	}[cmd]
	if !ok {
		usage()
		os.Exit(2)
	}
	cfg := config{command: cmd, roles: roles, embedded: cmd == "run"}
	fs := flag.NewFlagSet("uc "+cmd, flag.ExitOnError)
	cfg.register(fs)
	if err := parse(fs, os.Args[2:]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	log := newLogger(cfg.logLevel)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg, log); err != nil {
		log.Error("uc stopped", "err", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, `usage: uc run|watcher|dispatcher|applier|nats-config [flags]
  uc run          every role in one process, NATS embedded unless --nats-url is set
  uc watcher      the watch core
  uc dispatcher   the bus topology and webhook delivery
  uc applier      the applier
  uc nats-config  the NATS users and permissions of the roles and hook workers
Run "uc COMMAND -h" for the flags.`)
}

// parse sets flags from UC_* environment variables, then from args.
func parse(fs *flag.FlagSet, args []string) error {
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		name := "UC_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(name); ok && err == nil {
			if e := f.Value.Set(v); e != nil {
				err = fmt.Errorf("%s: %w", name, e)
			}
		}
	})
	if err != nil {
		return err
	}
	return fs.Parse(args)
}

func newLogger(level string) *slog.Logger {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		l = slog.LevelInfo
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l}))
}
