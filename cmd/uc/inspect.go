package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"

	"universalcontroller.dev/uc/internal/inspect"
	"universalcontroller.dev/uc/internal/natsauth"
	"universalcontroller.dev/uc/schemas/bus"
)

// The commands that look into the pipeline from outside (trace, dlq) and
// steer it (dlq replay, resync). Their logic is in internal/inspect.

func traceCommand() *cobra.Command {
	f := inspectFlags{kube: true}
	opts := inspect.TraceOptions{}
	c := &cobra.Command{
		Use:   "trace KIND/NAME [-n NAMESPACE]",
		Short: "Show where one parent is along the pipeline, and why",
		Long: `Follows one parent through uc's pipeline, for each UniversalController that
manages it, and says in one line where it is and what to do: the parent's
generation and resourceVersion; each hook's request waiting in UC_REQUESTS
(its id, observation stamp, when it was published, whether a worker holds
it) and the state of the hook's consumer (workers waiting, requests not
delivered or not acknowledged); a reply or failure waiting in UC_REPLIES for
the applier (when, from which worker); the last reply applied (the fence:
its request, generation, resourceVersion and when); the applier partition
and the replica that holds it; the parent's conditions and latest Events;
its children (owned, adoptable orphans, claimed by another object), when uc
last wrote each and what other field managers changed since; the
requests of the parent that were dead-lettered; and the plans nothing
applies: a dry-run controller's last plan (spec.dryRun: what uc would
have written), and its sync hook's shadow's last reply (spec.hooks.sync.shadow)
with how it differs from the sync hook's.

It only reads: messages are read with direct gets, never consumed or
acknowledged. KIND is a kind, a plural or a short name (foo, foos,
foos.samplecontroller.k8s.io); -n defaults to the kubeconfig's namespace.
On a NATS server with uc's users, connect as uc-inspector (uc nats-config
--cli).`,
		Example: `  # the Foo example-foo in the kubeconfig's namespace, against uc run on this machine
  uc trace foo/example-foo

  # in another namespace, for scripts
  uc trace composites/web -n shop -o json | jq '.[0].verdict'

  # against a NATS cluster, as the read-only user
  uc trace foo/example-foo --nats-url nats://nats.uc-system:4222 --nats-user uc-inspector --nats-password "$PW"`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := inspect.ParseTarget(args[0], f.namespace)
			if err != nil {
				return err
			}
			return show(cmd, &f, func(ctx context.Context, s *session) ([]*inspect.Trace, error) {
				t.Namespace = s.namespace
				return inspect.Follow(ctx, s.cluster, s.bus, t, opts)
			}, writeTraces)
		},
	}
	f.register(c.Flags())
	c.Flags().StringVar(&opts.Controller, "controller", "", "trace the parent for this UniversalController only (default: every one whose labelSelector selects it)")
	c.Flags().IntVar(&opts.Partitions, "partitions", bus.DefaultPartitions, "the installation's --partitions: the parent's applier partition when none of its messages is on the bus")
	c.Flags().IntVar(&opts.Events, "events", 10, "how many of the parent's latest Events to show")
	return c
}

func dlqCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "dlq",
		Short: "List, show and replay the requests no hook could serve",
		Long: `A request whose hook failed on every one of its deliveries
(spec.hooks.<hook>.delivery.maxDeliveries, 10 by default) is dead-lettered:
kept in the stream UC_DEADLETTER for 7 days, with the reason of its last
failure, while the parent says Synced=False/HookFailed. uc dlq ls lists
them, uc dlq show shows one with its request's body, uc dlq replay publishes
requests again once the hook is fixed.

A dead letter is superseded when a reply of its observation of the parent,
or of a later one, was applied since: replaying it changes nothing.`,
		Example: `  uc dlq ls --controller foo-controller
  uc dlq show 42
  uc dlq replay 42`,
	}
	c.AddCommand(dlqListCommand(), dlqShowCommand(), dlqReplayCommand())
	return c
}

func dlqListCommand() *cobra.Command {
	var f inspectFlags
	var controller string
	c := &cobra.Command{
		Use:   "ls [--controller NAME]",
		Short: "List the dead letters",
		Long: `Lists the dead letters, the oldest first: their id (what uc dlq show and uc
dlq replay take), when the request was dead-lettered, its controller, hook,
parent and generation, the reason and message of its last failure, and
whether it is superseded. It only reads; on a NATS server with uc's users,
connect as uc-inspector.`,
		Example: `  # every controller's
  uc dlq ls

  # one controller's, for scripts
  uc dlq ls --controller foo-controller -o json | jq '.[] | select(.superseded | not) | .id'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return show(cmd, &f, func(ctx context.Context, s *session) ([]*inspect.DeadLetter, error) {
				return s.bus.DeadLetters(ctx, controller)
			}, inspect.WriteDeadLetters)
		},
	}
	f.register(c.Flags())
	c.Flags().StringVar(&controller, "controller", "", "list this UniversalController's dead letters only (a UniversalDecorator's: ucd=NAME)")
	return c
}

func dlqShowCommand() *cobra.Command {
	var f inspectFlags
	c := &cobra.Command{
		Use:   "show ID",
		Short: "Show one dead letter, with its request's body",
		Long: `Shows one dead letter: why its last delivery failed, the parent and hook it
was for, its request's id, generation, resourceVersion and observation, and
the request's body (the JSON the hook was called with). It only reads; on a
NATS server with uc's users, connect as uc-inspector.`,
		Example: `  uc dlq show 42

  # the request's body, to call a hook with by hand
  uc dlq show 42 -o json | jq .data > request.json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := deadLetterID(args[0])
			if err != nil {
				return err
			}
			return show(cmd, &f, func(ctx context.Context, s *session) (*inspect.DeadLetter, error) {
				return s.bus.DeadLetter(ctx, id)
			}, inspect.WriteDeadLetter)
		},
	}
	f.register(c.Flags())
	return c
}

func dlqReplayCommand() *cobra.Command {
	var f inspectFlags
	var controller string
	c := &cobra.Command{
		Use:   "replay ID | --controller NAME",
		Short: "Publish dead-lettered requests again, once the hook is fixed",
		Long: `Publishes the request of a dead letter again to UC_REQUESTS, with a new
request id and its observation stamp unchanged, and deletes the dead letter
(a request that fails again is dead-lettered again). The parent's fence
still protects newer state: the reply to a request older than the last one
applied is dropped, so a replay never undoes a later change. A request for
the parent already waiting in UC_REQUESTS is at least as new: then nothing
is published.

With --controller, it replays the dead letters of that controller that are
not superseded, for each parent and hook the latest one. On a NATS server
with uc's users, connect as uc-operator.`,
		Example: `  # one dead letter
  uc dlq replay 42

  # every parent of a controller whose request was dead-lettered
  uc dlq replay --controller foo-controller`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case len(args) == 1 && controller != "":
				return errors.New("give a dead letter's ID or --controller, not both")
			case len(args) == 0 && controller == "":
				return errors.New("give a dead letter's ID or --controller")
			}
			var id uint64
			if len(args) == 1 {
				var err error
				if id, err = deadLetterID(args[0]); err != nil {
					return err
				}
			}
			return show(cmd, &f, func(ctx context.Context, s *session) ([]inspect.Replayed, error) {
				if controller != "" {
					return s.bus.ReplayController(ctx, controller)
				}
				r, err := s.bus.Replay(ctx, id)
				return []inspect.Replayed{r}, err
			}, inspect.WriteReplayed)
		},
	}
	f.register(c.Flags())
	c.Flags().StringVar(&controller, "controller", "", "replay this UniversalController's dead letters (a UniversalDecorator's: ucd=NAME)")
	return c
}

func resyncCommand() *cobra.Command {
	f := inspectFlags{kube: true}
	var controller string
	var partitions int
	c := &cobra.Command{
		Use:   "resync KIND/NAME [-n NAMESPACE] | --controller NAME",
		Short: "Ask the watcher for an immediate sync of a parent, or of every parent of a controller",
		Long: `Asks uc's active watcher to sync a parent now: it publishes a new hook request
with the parent's current state, even when nothing changed since the last
one, as a reply's resyncAfterSeconds does. The request is a core NATS
message on uc.resync.<controller>.sync.<partition>.<parent-uid> (see
docs/bus.md), answered by the watcher once the parent is queued; the
command says when no watcher answered.

KIND/NAME syncs one parent, for each UniversalController that selects it
(or --controller's). --controller alone syncs every parent of the
controller, in -n's namespace when -n is given, else in every namespace.
On a NATS server with uc's users, connect as uc-operator.`,
		Example: `  # one parent
  uc resync foo/example-foo -n default

  # every parent of a controller
  uc resync --controller foo-controller`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var t inspect.Target
			switch {
			case len(args) == 0 && controller == "":
				return errors.New("give a parent, KIND/NAME, or --controller")
			case len(args) == 1:
				var err error
				if t, err = inspect.ParseTarget(args[0], f.namespace); err != nil {
					return err
				}
			}
			return show(cmd, &f, func(ctx context.Context, s *session) ([]inspect.Resynced, error) {
				if len(args) == 1 {
					t.Namespace = s.namespace
					return inspect.ResyncParent(ctx, s.cluster, s.nc, t, controller, partitions)
				}
				ns := ""
				if cmd.Flags().Changed("namespace") {
					ns = f.namespace
				}
				return inspect.ResyncController(ctx, s.cluster, s.nc, controller, ns, partitions)
			}, inspect.WriteResynced)
		},
	}
	f.register(c.Flags())
	c.Flags().StringVar(&controller, "controller", "", "the UniversalController whose parents to sync (with KIND/NAME: for this controller only)")
	c.Flags().IntVar(&partitions, "partitions", bus.DefaultPartitions, "the installation's --partitions: the partition token of the resync subjects")
	return c
}

// writeTraces writes traces for a person, a blank line between two.
func writeTraces(w io.Writer, traces []*inspect.Trace) error {
	for i, tr := range traces {
		if i > 0 {
			fmt.Fprintln(w)
		}
		if err := inspect.WriteTrace(w, tr); err != nil {
			return err
		}
	}
	return nil
}

// deadLetterID reads a dead letter's id: its sequence number in
// UC_DEADLETTER.
func deadLetterID(arg string) (uint64, error) {
	id, err := strconv.ParseUint(arg, 10, 64)
	if err != nil || id == 0 {
		return 0, fmt.Errorf("%q is not a dead letter's ID (a number, from uc dlq ls)", arg)
	}
	return id, nil
}

// inspectFlags are the flags of the commands of this file: where NATS is,
// where the cluster is (for those that read it), and the output format.
type inspectFlags struct {
	kube       bool // the command reads the cluster
	kubeconfig string
	namespace  string
	nats       bus.Connection
	output     string
}

func (f *inspectFlags) register(fs *pflag.FlagSet) {
	if f.kube {
		fs.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or in-cluster)")
		f.registerNamespace(fs)
	}
	f.registerNATS(fs)
	fs.StringVarP(&f.output, "output", "o", "text", "text, for a person, or json, for scripts")
}

func (f *inspectFlags) registerNamespace(fs *pflag.FlagSet) {
	fs.StringVarP(&f.namespace, "namespace", "n", "", "the parent's namespace (default: the kubeconfig's)")
}

// registerNATS registers the flags of the NATS connection.
func (f *inspectFlags) registerNATS(fs *pflag.FlagSet) {
	fs.StringVar(&f.nats.URL, "nats-url", nats.DefaultURL, "NATS server URL (uc run's embedded server listens on 127.0.0.1:4222)")
	natsFlags := flag.NewFlagSet("nats", flag.ContinueOnError)
	f.nats.RegisterFlags(natsFlags, func(string) string { return "" })
	fs.AddGoFlagSet(natsFlags)
}

// session is what a command works with.
type session struct {
	nc      *nats.Conn
	bus     *inspect.Bus
	cluster *inspect.Cluster // nil unless the command reads the cluster
	kube    *rest.Config     // the cluster's, with cluster
	// namespace is -n's, or the kubeconfig's.
	namespace string
}

// show runs get and writes what it returned to the command's output: as
// JSON with -o json, else with text.
func show[T any](cmd *cobra.Command, f *inspectFlags, get func(context.Context, *session) (T, error), text func(io.Writer, T) error) error {
	return f.run(cmd, func(ctx context.Context, s *session) error {
		v, err := get(ctx, s)
		if err != nil {
			return err
		}
		if f.output == "json" {
			enc := json.NewEncoder(cmd.OutOrStdout())
			enc.SetIndent("", "  ")
			return enc.Encode(v)
		}
		return text(cmd.OutOrStdout(), v)
	})
}

// run connects, runs fn, and reports its failure on stderr: uc exits 1.
// A wrong --output is a usage error: uc exits 2.
func (f *inspectFlags) run(cmd *cobra.Command, fn func(context.Context, *session) error) error {
	if f.output != "text" && f.output != "json" {
		return fmt.Errorf("--output %q: want text or json", f.output)
	}
	err := f.session(cmd.Context(), fn)
	if err != nil {
		fmt.Fprintf(cmd.ErrOrStderr(), "%s: %v\n", cmd.CommandPath(), err)
		return errLogged
	}
	return nil
}

// session connects to NATS, and to the cluster when the command reads it,
// and runs fn. An operation the NATS server refuses (the user may not)
// ends fn at once, and is what is reported.
func (f *inspectFlags) session(ctx context.Context, fn func(context.Context, *session) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	conn := f.nats
	conn.InboxPrefix = natsauth.CLIInbox
	quiet := slog.New(slog.DiscardHandler) // the refusal is reported below
	nc, err := conn.Connect("uc-cli", quiet, func(err error) { cancel(err) })
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	s := &session{nc: nc, bus: inspect.NewBus(js)}
	if f.kube {
		kc := kubeClientConfig(f.kubeconfig)
		cfg, err := kc.ClientConfig()
		if err != nil {
			return fmt.Errorf("kubeconfig: %w", err)
		}
		if s.namespace = f.namespace; s.namespace == "" {
			if s.namespace, _, err = kc.Namespace(); err != nil {
				return fmt.Errorf("kubeconfig: %w", err)
			}
		}
		cfg.UserAgent = "uc-cli"
		cfg.Timeout = restTimeout
		s.kube = cfg
		if s.cluster, err = inspect.NewCluster(cfg); err != nil {
			return err
		}
	}
	err = fn(ctx, s)
	if cause := context.Cause(ctx); err != nil && cause != nil && !errors.Is(cause, context.Canceled) {
		return fmt.Errorf("%w (NATS: %v)", err, cause)
	}
	return err
}
