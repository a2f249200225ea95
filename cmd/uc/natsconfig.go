package main

import (
	"io"
	"strings"

	"github.com/spf13/cobra"

	"universalcontroller.dev/uc/internal/natsauth"
	"universalcontroller.dev/uc/schemas/bus"
)

func natsConfigCommand() *cobra.Command {
	var controllers, decorators string
	var partitions int
	var cli bool
	c := &cobra.Command{
		Use:   "nats-config",
		Short: "Print the NATS users and permissions of uc's roles and hook workers",
		Long: `Prints a nats-server configuration block (include it in nats.conf): the
account UC with JetStream and uc's users, each allowed only the subjects it
needs: one user per role (uc-watcher, uc-dispatcher, uc-applier) and one per
listed controller's and decorator's hook workers. With --cli, also the users
of the commands that look into the pipeline: uc-inspector (uc trace, uc dlq
ls, uc dlq show: reads only) and uc-operator (also uc dlq replay and uc
resync). Passwords are variables: UC_NATS_PASSWORD_<USER>, the user's name in
upper case with underscores.`,
		Example: `  # the roles' users: deploy/nats/auth.conf
  uc nats-config > auth.conf

  # with foo-controller's hook workers
  uc nats-config --controllers foo-controller > auth.conf

  # with a decorator's hook workers, for an installation of 64 partitions
  uc nats-config --controllers foo-controller --decorators pod-labels --partitions 64

  # with the users of uc trace, uc dlq and uc resync
  uc nats-config --controllers foo-controller --cli`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return natsConfig(cmd.OutOrStdout(), controllers, decorators, partitions, cli)
		},
	}
	c.Flags().StringVar(&controllers, "controllers", "", "comma-separated names of the UniversalControllers whose hook workers get a user")
	c.Flags().StringVar(&decorators, "decorators", "", "comma-separated names of the UniversalDecorators whose hook workers get a user")
	c.Flags().IntVar(&partitions, "partitions", bus.DefaultPartitions, "the installation's --partitions: the applier's consumers")
	c.Flags().BoolVar(&cli, "cli", false, "also declare uc-inspector and uc-operator, the users of uc trace, uc dlq and uc resync")
	return c
}

// natsConfig prints the nats-server configuration block of uc's users: one
// per role, one per listed controller's hook workers, and with cli the
// inspector and the operator.
func natsConfig(out io.Writer, controllers, decorators string, partitions int, cli bool) error {
	names := strings.Split(controllers, ",")
	for d := range strings.SplitSeq(decorators, ",") {
		if d != "" {
			names = append(names, bus.DecoratorController(d))
		}
	}
	users, err := natsauth.Users(partitions, names...)
	if err != nil {
		return err
	}
	if cli {
		users = append(users, natsauth.Inspector(), natsauth.Operator())
	}
	_, err = io.WriteString(out, natsauth.Config(users))
	return err
}
