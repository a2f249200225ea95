package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"universalcontroller.dev/uc/applier"
	"universalcontroller.dev/uc/core"
	"universalcontroller.dev/uc/internal/exechook"
	"universalcontroller.dev/uc/internal/inspect"
	"universalcontroller.dev/uc/internal/render"
	"universalcontroller.dev/uc/schemas/hooks"
)

func renderCommand() *cobra.Command {
	var opts render.Options
	var fromTrace string
	trace := inspectFlags{kube: true}
	c := &cobra.Command{
		Use:   "render (--controller FILE --parent FILE [--observed FILE|DIR...] | --from-trace KIND/NAME [-n NAMESPACE]) (--exec COMMAND | --url URL) [flags]",
		Short: "Call a controller's hook once for a parent, offline, and show what uc would do with its reply",
		Long: `Calls a controller's hook once, with no cluster and no bus: builds the
request uc would send for the parent (as the watcher builds it, for the
controller's hook version), calls the hook — a command as uc worker runs
it, with the request on its standard input and UC_EXEC_HOOK naming the
hook, or a webhook as the dispatcher calls it — and checks the reply with
the applier's rules (declared child kinds, namespaces, names, the parent's
selector). It prints the parent with the hook's status and the desired
children as uc would write them (YAML documents), then the plan: which
children would be created, updated (with a diff), deleted, adopted or
released, given the observed objects.

A decorator (a UniversalDecorator or DecoratorController) is rendered for
the object given as --parent: its request, its attachments, and the
labels, annotations and status it sets on the object.

The observed objects (--observed, --related: files or directories, YAML or
JSON, Lists too) are the parent's children and the objects its customize
hook may select; without them the parent has none. --kubeconfig reads them
from a cluster instead, read-only. Custom resources are resolved from their
CustomResourceDefinitions (--crd, or among the --controller documents),
built-in kinds from client-go. A parent without metadata.uid gets one made
up from its name, and a namespaced one without a namespace is in default.

A Go worker built with the SDK's hook.Main serves one request when
UC_EXEC_HOOK is set, so its binary (or go run) is a command render can run.

--from-trace KIND/NAME replays what a cluster did: instead of files, the
input is the last request uc published for that parent, as uc's active
watcher gives it (over NATS, as uc trace asks it: the same flags and
users), and the plan is against the children that request observed. So a
reply seen rejected in a cluster is reproduced on this machine, against a
hook being fixed. The watcher builds the request from its caches; when the
parent changed since its last request, render says so and renders the one
the watcher publishes next. --controller then names the UniversalController,
when several select the parent. --save DIR also writes the request as files
this command reads without a cluster (controller.yaml, crds.yaml,
parent.yaml, observed.yaml, related.yaml) and as request.json. It only
reads the cluster.

Exits 0 with the result, 1 when the hook fails or its reply would be
rejected — saying what the parent's Synced condition would — and 2 on a
wrong command line or input.`,
		Example: `  # a Python hook, as uc worker runs it
  uc render --controller examples/python-worker/controller.yaml --crd examples/python-worker/crd.yaml \
    --parent examples/python-worker/website.yaml --exec 'python3 examples/python-worker/hook.py'

  # a Go worker, against the children it has in a cluster (read-only)
  uc render --controller examples/foo/controller.yaml --parent examples/foo/foo.yaml \
    --kubeconfig ~/.kube/config --exec 'go run ./examples/foo/cmd/foo-hook'

  # a webhook, with observed children from files, the result as JSON
  uc render --controller examples/python-webhook/controller.yaml --crd examples/python-webhook/crd.yaml \
    --parent greeting.yaml --observed children/ --url http://127.0.0.1:8080/sync -o json

  # the request alone, to feed a hook's own tests
  uc render --controller controller.yaml --crd crd.yaml --parent parent.yaml -o request > request.json

  # the last request uc published for a parent in a cluster, against the hook being fixed
  uc render --from-trace website/hello -n default --exec 'python3 hook.py'

  # the same, saved as files for later, offline
  uc render --from-trace website/hello -n default --save ./hello-request -o request`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkRender(opts, fromTrace != ""); err != nil {
				return err
			}
			if fromTrace != "" {
				return renderFromTrace(cmd, opts, &trace, fromTrace)
			}
			return rendered(cmd, render.Run(cmd.Context(), opts, cmd.OutOrStdout(), cmd.ErrOrStderr()))
		},
	}
	fs := c.Flags()
	fs.StringArrayVar(&opts.Controller, "controller", nil, "file of the controller: a UniversalController or UniversalDecorator, or Metacontroller's CompositeController or DecoratorController (with CustomResourceDefinitions, if any; of several controllers, the one of the parent's kind); repeatable")
	// UC_CONTROLLER names a controller for uc worker, dlq, resync and
	// trace: the file is another variable.
	if err := fs.SetAnnotation("controller", envAnnotation, []string{"UC_CONTROLLER_FILE"}); err != nil {
		panic(err) // the flag is in fs
	}
	fs.StringArrayVar(&opts.CRDs, "crd", nil, "file or directory of CustomResourceDefinitions of the custom resources the controller names; repeatable")
	fs.StringVar(&opts.Parent, "parent", "", "file of the parent object")
	fs.StringArrayVar(&opts.Observed, "observed", nil, "file or directory of observed children; repeatable")
	fs.StringArrayVar(&opts.Related, "related", nil, "file or directory of objects the customize hook may select (and Namespaces, for its namespaceSelector); repeatable")
	fs.StringVar(&opts.Kubeconfig, "kubeconfig", "", "read the observed and related objects from this cluster instead of files (read-only: render only lists and gets)")
	fs.StringVar(&opts.Hook, "hook", "", "the hook called: sync, finalize or customize (default: the one uc would call, finalize for a parent being deleted)")
	fs.StringVar(&opts.Exec, "exec", "", "command line (run by sh -c) that serves the hook: the request on its standard input, the reply on its standard output")
	fs.StringVar(&opts.URL, "url", "", "URL of a webhook that serves the hook (default: the controller's webhook, if it has one)")
	fs.DurationVar(&opts.Timeout, "timeout", 0, "how long the call may take (default: the controller's delivery timeout for the hook, else 10s); the command is killed then")
	fs.Int64Var(&opts.MaxReplyBytes, "max-reply-bytes", exechook.DefaultMaxReplyBytes, "largest reply taken from the hook, as uc worker takes it")
	fs.IntVar(&opts.MaxChildren, "max-children-per-reply", applier.DefaultMaxChildren, "most children one reply may have, as uc's appliers allow")
	fs.StringVarP(&opts.Output, "output", "o", render.OutputYAML, "yaml, json, or request (print the request, call nothing)")
	fs.StringVar(&fromTrace, "from-trace", "", "KIND/NAME: render the last request uc published for this parent (asking uc's watcher over NATS), instead of --parent and --observed")
	fs.StringVar(&opts.Save, "save", "", "with --from-trace: also write the request into this directory, as files render reads without a cluster")
	trace.registerNamespace(fs)
	trace.registerNATS(fs)
	return c
}

// rendered reports a render's end: a reply the applier would reject, or
// a hook that failed, is said as the parent would say it, and uc exits 1.
func rendered(cmd *cobra.Command, err error) error {
	var rejected *core.Rejection
	switch {
	case errors.As(err, &rejected) && rejected.Decorated:
		fmt.Fprintf(cmd.ErrOrStderr(), "uc render: the object would get a Warning Event %s: %s\n", rejected.Reason, rejected.Message)
		return errLogged
	case errors.As(err, &rejected):
		fmt.Fprintf(cmd.ErrOrStderr(), "uc render: the parent would get Synced=False, %s: %s\n", rejected.Reason, rejected.Message)
		return errLogged
	}
	return err
}

// renderFromTrace renders the last request uc published for the parent
// named by target.
func renderFromTrace(cmd *cobra.Command, opts render.Options, f *inspectFlags, target string) error {
	t, err := inspect.ParseTarget(target, f.namespace)
	if err != nil {
		return err
	}
	f.kubeconfig = opts.Kubeconfig
	var controller string
	if len(opts.Controller) == 1 {
		controller = opts.Controller[0]
	}
	notes := cmd.ErrOrStderr()
	err = f.session(cmd.Context(), func(ctx context.Context, s *session) error {
		t.Namespace = s.namespace
		last, err := inspect.RequestOf(ctx, s.cluster, s.bus, t, controller)
		if err != nil {
			return err
		}
		req := last.Request
		if req.Published {
			fmt.Fprintf(notes, "note: the %s request %s, published %s, for generation %d (resourceVersion %s)\n",
				req.Hook, last.Published.ID, last.Published.Published.Format(time.RFC3339), req.Generation, req.ResourceVersion)
		} else {
			fmt.Fprintf(notes, "note: the parent changed since its last request (%s); this is the %s request the watcher publishes next, for generation %d (resourceVersion %s)\n",
				cmp.Or(last.Published.ID, "none since the watcher started"), req.Hook, req.Generation, req.ResourceVersion)
		}
		replay := render.Replay{Controller: last.Controller, Hook: req.Hook, Request: req.Data, Cluster: s.kube}
		return rendered(cmd, render.RunReplay(ctx, replay, opts, cmd.OutOrStdout(), notes))
	})
	if err != nil && !errors.Is(err, errLogged) {
		fmt.Fprintf(notes, "uc render: %v\n", err)
		return errLogged
	}
	return err
}

// checkRender refuses a command line render cannot run. With --from-trace
// the request is the input: the parent, the observed and related objects
// and the hook are its.
func checkRender(opts render.Options, fromTrace bool) error {
	switch {
	case fromTrace && (opts.Parent != "" || len(opts.Observed)+len(opts.Related)+len(opts.CRDs) > 0 || opts.Hook != ""):
		return errors.New("--from-trace takes the parent, the observed and related objects and the hook from the request: give none of --parent, --observed, --related, --crd and --hook")
	case fromTrace && len(opts.Controller) > 1:
		return errors.New("--from-trace: --controller names one UniversalController")
	case fromTrace:
	case opts.Save != "":
		return errors.New("--save writes the request of --from-trace")
	case len(opts.Controller) == 0:
		return errors.New("--controller is needed")
	case opts.Parent == "":
		return errors.New("--parent is needed")
	case opts.Kubeconfig != "" && len(opts.Observed)+len(opts.Related) > 0:
		return errors.New("--kubeconfig reads the observed and related objects from the cluster: give it, or --observed and --related")
	case opts.Hook != "" && !slices.Contains([]string{hooks.Sync, hooks.Finalize, hooks.Customize}, opts.Hook):
		return fmt.Errorf("--hook %q: sync, finalize or customize", opts.Hook)
	}
	switch {
	case opts.Exec != "" && opts.URL != "":
		return errors.New("--exec and --url: give one")
	case !slices.Contains([]string{render.OutputYAML, render.OutputJSON, render.OutputRequest}, opts.Output):
		return fmt.Errorf("--output %q: yaml, json or request", opts.Output)
	case opts.MaxChildren < 1:
		return fmt.Errorf("--max-children-per-reply %d: at least 1", opts.MaxChildren)
	}
	return nil
}
