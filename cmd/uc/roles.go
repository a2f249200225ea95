package main

import (
	"github.com/spf13/cobra"
)

// The commands that run roles of the pipeline: all of them (run), or one.

func runCommand() *cobra.Command {
	return roleCommand(&cobra.Command{
		Use:   "run",
		Short: "Run every role in one process, with an embedded NATS JetStream server",
		Long: `Runs the watcher, the dispatcher and the applier in one process. Unless
--nats-url is set, it starts an embedded NATS JetStream server that stores to
--data-dir and listens on --nats-listen, where bus-native hook workers
connect. Nothing else to install: a kubeconfig is all it needs.`,
		Example: `  # the cluster of $KUBECONFIG; hook workers connect to nats://127.0.0.1:4222
  uc run

  # on a free port, JSON logs
  uc run --nats-listen 127.0.0.1:0 --log-format json

  # every role against an external NATS
  uc run --nats-url nats://127.0.0.1:4222`,
	}, roleSet{watcher: true, dispatcher: true, applier: true})
}

func watcherCommand() *cobra.Command {
	return roleCommand(&cobra.Command{
		Use:   "watcher",
		Short: "Run the watch core: watch parents, children and related objects, publish hook requests",
		Long: `Runs the watch core against an external NATS: it watches the
UniversalControllers and UniversalDecorators, their parents, children and
related objects (one informer per resource type), and publishes one request
per parent change. Its replicas elect one active watcher with the uc-watcher
Lease; the others stand by with warm caches.`,
		Example: `  UC_NATS_URL=nats://nats.uc-system:4222 uc watcher --leader-elect-namespace uc-system`,
	}, roleSet{watcher: true})
}

func dispatcherCommand() *cobra.Command {
	return roleCommand(&cobra.Command{
		Use:   "dispatcher",
		Short: "Run the dispatcher: the bus topology and delivery to webhooks and Knative destinations",
		Long: `Runs the dispatcher against an external NATS: it creates the streams and the
hooks' consumers, and calls the hooks that are not on the bus (webhooks and
Knative destinations) as CloudEvents over HTTP, with retries, timeouts and
dead letters.`,
		Example: `  uc dispatcher --nats-url nats://nats.uc-system:4222 --stream-replicas 3`,
	}, roleSet{dispatcher: true})
}

func applierCommand() *cobra.Command {
	return roleCommand(&cobra.Command{
		Use:   "applier",
		Short: "Run the applier: apply hook replies to the cluster",
		Long: `Runs the applier against an external NATS: it consumes the hooks' replies
and makes the cluster match them (children, rolling updates, status,
finalizers, Events). Run as many replicas as needed: they share the
partitions, each parent belongs to one replica at a time.`,
		Example: `  uc applier --nats-url nats://nats.uc-system:4222 --replica-id applier-0`,
	}, roleSet{applier: true})
}

// roleCommand completes c, a command that runs roles: its flags, and
// running them until the process is told to stop.
func roleCommand(c *cobra.Command, roles roleSet) *cobra.Command {
	cfg := config{command: c.Name(), roles: roles, embedded: c.Name() == "run"}
	cfg.register(c.Flags())
	c.Args = cobra.NoArgs
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		log, err := cfg.log.logger(cmd.ErrOrStderr())
		if err != nil {
			return err
		}
		if err := run(cmd.Context(), cfg, log); err != nil {
			log.Error("uc stopped", "err", err)
			return errLogged
		}
		return nil
	}
	return c
}
