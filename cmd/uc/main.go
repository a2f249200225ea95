// Command uc is UniversalController: a declarative Kubernetes operator whose
// controllers are one UniversalController object and one hook each.
//
//	uc run          every role in one process, with an embedded NATS JetStream server
//	uc watcher      the watch core only, against an external NATS
//	uc dispatcher   the bus topology and non-bus hook delivery only
//	uc applier      the applier only
//	uc nats-config  prints the NATS users and permissions of uc's roles and hook workers
//	uc nats-certs   writes a CA and the NATS servers' certificate, without cert-manager
//	uc nats-reloader keeps a NATS server's passwords and certificates current without a restart
//	uc worker       serves a controller's hook on the bus with any executable
//	uc trace        shows where one parent is along the pipeline, and why
//	uc dlq          lists, shows and replays the requests no hook could serve
//	uc resync       asks the watcher for an immediate sync of a parent
//	uc render       calls a hook once, offline, and shows what uc would do with its reply
//	uc validate     checks controller objects against uc's schemas
//	uc rbac         prints the RBAC a controller needs, made from its controller object
//	uc init         writes a new controller to start a hook of your own from
//	uc version      prints uc's version, commit and build date
//
// Every flag can also be set as an environment variable: --nats-url is
// UC_NATS_URL. "uc help COMMAND" or "uc COMMAND -h" lists a command's flags
// and their variables.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := execute(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// errLogged is what a command returns when it failed after it started to
// log: it logged why, so uc exits 1 without saying it again.
var errLogged = errors.New("failed (see the log)")

// execute runs uc with args and returns the process's exit code: 0, 1 when
// a command failed (errLogged), 2 when the command line or a UC_* variable
// is wrong.
func execute(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newCLI()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteContextC(ctx)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errLogged):
		return 1
	}
	fmt.Fprintf(stderr, "uc: %v\nRun '%s --help' for usage.\n", err, cmd.CommandPath())
	return 2
}

// newRootCommand is uc with all its commands.
func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "uc",
		Short: "UniversalController: a declarative Kubernetes operator on NATS JetStream",
		Long: `UniversalController (uc) runs Metacontroller-style controllers: a controller is
one UniversalController object (its parent resource, its child resources and
where its hooks are) and one hook, a function (parent, children, related) ->
(status, desired children) in any language. uc watches, calls the hooks over
NATS JetStream or HTTP, and applies their replies.

uc run is everything in one process, with an embedded NATS JetStream server.
On a cluster, uc watcher, uc dispatcher and uc applier each run one role
against a NATS cluster (see deploy/).

Every flag can also be set as an environment variable: UC_ and the flag's
name in upper case, dashes as underscores (--nats-url is UC_NATS_URL). A flag
on the command line wins over its variable.`,
		Example: `  # every role in one process, against the cluster of ~/.kube/config
  uc run

  # the flags of a command, and their variables
  uc run --help

  # one role against a NATS cluster
  UC_NATS_URL=nats://nats.uc-system:4222 uc applier --replica-id applier-0`,
		Version:       readVersion().String(),
		SilenceErrors: true, // execute prints them
		SilenceUsage:  true,
		// After the command line is parsed: a flag it does not set takes
		// its UC_* variable.
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error { return setFromEnv(cmd.Flags()) },
	}
	root.SetVersionTemplate("{{.Version}}")
	root.SetHelpCommand(helpCommand())
	// uc's commands: a new command is one more line here.
	root.AddCommand(
		runCommand(),
		watcherCommand(),
		dispatcherCommand(),
		applierCommand(),
		natsConfigCommand(),
		natsCertsCommand(),
		natsReloaderCommand(),
		workerCommand(),
		traceCommand(),
		dlqCommand(),
		resyncCommand(),
		renderCommand(),
		validateCommand(),
		rbacCommand(),
		initCommand(),
		versionCommand(),
	)
	for _, c := range subcommands(root) {
		bindEnv(c.Flags())
	}
	return root
}

// newCLI is uc as it runs: its commands, cobra's help and completion
// commands, and every group (uc dlq, uc completion) alone its help, and
// with a word that is none of its commands a usage error (cobra's own
// prints the group's help and exits 0).
func newCLI() *cobra.Command {
	root := newRootCommand()
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	for _, c := range subcommands(root) {
		if c.HasSubCommands() && !c.Runnable() {
			c.Args = cobra.NoArgs
			c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
		}
	}
	return root
}

// helpCommand is uc help [COMMAND...]: a command's help, or a usage error
// for a command uc does not have (cobra's own says so and exits 0).
func helpCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "help [COMMAND]",
		Short: "Help about any command",
		Args:  cobra.ArbitraryArgs, // a command's words: checked below
		RunE: func(cmd *cobra.Command, args []string) error {
			target, rest, err := cmd.Root().Find(args)
			if err != nil || len(rest) > 0 {
				return fmt.Errorf("unknown help topic %q", strings.Join(args, " "))
			}
			return target.Help()
		},
	}
}

// subcommands lists every command below c, at any depth (uc dlq ls).
func subcommands(c *cobra.Command) []*cobra.Command {
	var all []*cobra.Command
	for _, sub := range c.Commands() {
		all = append(all, sub)
		all = append(all, subcommands(sub)...)
	}
	return all
}
