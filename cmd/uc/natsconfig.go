package main

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"universalcontroller.dev/uc/internal/natsauth"
	"universalcontroller.dev/uc/schemas/bus"
)

// natsConfig prints the nats-server configuration block of uc's users: one
// per role, one per listed controller's hook workers.
func natsConfig(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("uc nats-config", flag.ContinueOnError)
	controllers := fs.String("controllers", "", "comma-separated names of the UniversalControllers whose hook workers get a user")
	decorators := fs.String("decorators", "", "comma-separated names of the UniversalDecorators whose hook workers get a user")
	partitions := fs.Int("partitions", bus.DefaultPartitions, "the installation's --partitions: the applier's consumers")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), `usage: uc nats-config [--controllers a,b] [--decorators c,d] [--partitions 32]
Prints a nats-server configuration block (include it in nats.conf): the
account UC with JetStream and uc's users, each allowed only the subjects it
needs. Passwords are variables: UC_NATS_PASSWORD_<USER>.`)
		fs.PrintDefaults()
	}
	if err := parse(fs, args); err != nil {
		return err
	}
	names := strings.Split(*controllers, ",")
	for d := range strings.SplitSeq(*decorators, ",") {
		if d != "" {
			names = append(names, bus.DecoratorController(d))
		}
	}
	users, err := natsauth.Users(*partitions, names...)
	if err != nil {
		return err
	}
	_, err = io.WriteString(out, natsauth.Config(users))
	return err
}
