package main

import (
	"github.com/spf13/cobra"

	"universalcontroller.dev/uc/internal/natsreload"
)

func natsReloaderCommand() *cobra.Command {
	var c natsreload.Config
	var once bool
	var logs logOptions
	cmd := &cobra.Command{
		Use:   "nats-reloader",
		Short: "Keep a NATS server's passwords and certificates current without a restart",
		Long: `Renders the NATS users (--auth-conf, made by uc nats-config) with their
passwords defined above them, each read from the file of its variable in
--passwords-dir (the Secret of the passwords, mounted), into --out, which
the server's nats.conf includes. Then it watches those files and the
--watch directories (the servers' certificates): when one changes, it
renders --out again and signals the server (SIGHUP, to the pid of
--pid-file) to reload its configuration. Clients whose password changed
are disconnected and connect again with the new one; the server keeps
running.

It runs beside nats-server in the NATS Pods of deploy/ and the Helm chart,
in the same process namespace (shareProcessNamespace) and as the same user;
--once renders and exits, as their init container, so that the server
starts with the file.`,
		Example: `  # as the NATS Pods run it
  uc nats-reloader --auth-conf /etc/nats/config/auth.conf --passwords-dir /etc/nats/passwords \
    --out /etc/nats/auth/auth.conf --pid-file /var/run/nats/nats.pid \
    --require /etc/nats/tls/tls.crt --require /etc/nats/tls/tls.key --watch /etc/nats/tls`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := logs.logger(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			if once {
				if _, err := c.Write(); err != nil {
					return err
				}
				log.Info("rendered the NATS users", "out", c.Out)
				return nil
			}
			return c.Run(cmd.Context(), log)
		},
	}
	f := cmd.Flags()
	c.RegisterFlags(f)
	f.BoolVar(&once, "once", false, "render --out and exit")
	logs.register(f)
	return cmd
}
