// Command uc-testbed runs the test bed (a Kubernetes control plane with a
// kwok node, see package testbed) until interrupted, for trying uc by hand:
//
//	uc-testbed up --dir DIR
//
// It writes DIR/kubeconfig, prints how to use it, and stops everything on
// SIGINT or SIGTERM. Without --dir it uses a temporary directory that it
// removes on exit.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"universalcontroller.dev/uc/test/testbed"
)

const usage = "usage: uc-testbed up [--dir DIR]"

func main() {
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, nil)))
	if err := run(os.Args[1:]); err != nil {
		slog.Error("uc-testbed failed", "err", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 || args[0] != "up" {
		return errors.New(usage)
	}
	flags := flag.NewFlagSet("up", flag.ContinueOnError)
	dir := flags.String("dir", "", "work directory for data, credentials, logs and the kubeconfig (default: a temporary one)")
	if err := flags.Parse(args[1:]); err != nil {
		return err
	}
	if flags.NArg() > 0 {
		return errors.New(usage)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	bed, err := testbed.Start(ctx, testbed.Options{Dir: *dir})
	if err != nil {
		return err
	}
	defer bed.Stop()

	fmt.Printf("kubeconfig: %s\napiserver:  %s\nlogs:       %s\n\nexport KUBECONFIG=%s\n",
		bed.Kubeconfig(), bed.APIServerURL(), bed.Dir(), bed.Kubeconfig())
	<-ctx.Done()
	slog.Info("stopping test bed")
	return nil
}
