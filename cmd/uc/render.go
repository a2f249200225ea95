package main

import (
	"errors"
	"fmt"
	"slices"

	"github.com/spf13/cobra"

	"universalcontroller.dev/uc/applier"
	"universalcontroller.dev/uc/internal/exechook"
	"universalcontroller.dev/uc/internal/render"
	"universalcontroller.dev/uc/schemas/hooks"
)

func renderCommand() *cobra.Command {
	var opts render.Options
	c := &cobra.Command{
		Use:   "render --controller FILE --parent FILE [--observed FILE|DIR...] (--exec COMMAND | --url URL) [flags]",
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
  uc render --controller controller.yaml --crd crd.yaml --parent parent.yaml -o request > request.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkRender(opts); err != nil {
				return err
			}
			err := render.Run(cmd.Context(), opts, cmd.OutOrStdout(), cmd.ErrOrStderr())
			var rejected *applier.Rejection
			switch {
			case errors.As(err, &rejected) && rejected.Decorated:
				fmt.Fprintf(cmd.ErrOrStderr(), "uc render: the object would get a Warning Event %s: %s\n", rejected.Reason, rejected.Message)
				return errLogged
			case errors.As(err, &rejected):
				fmt.Fprintf(cmd.ErrOrStderr(), "uc render: the parent would get Synced=False, %s: %s\n", rejected.Reason, rejected.Message)
				return errLogged
			}
			return err
		},
	}
	fs := c.Flags()
	fs.StringArrayVar(&opts.Controller, "controller", nil, "file of the controller: a UniversalController or UniversalDecorator, or Metacontroller's CompositeController or DecoratorController (with CustomResourceDefinitions, if any; of several controllers, the one of the parent's kind); repeatable")
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
	return c
}

// checkRender refuses a command line render cannot run.
func checkRender(opts render.Options) error {
	switch {
	case len(opts.Controller) == 0:
		return errors.New("--controller is needed")
	case opts.Parent == "":
		return errors.New("--parent is needed")
	case opts.Kubeconfig != "" && len(opts.Observed)+len(opts.Related) > 0:
		return errors.New("--kubeconfig reads the observed and related objects from the cluster: give it, or --observed and --related")
	case opts.Exec != "" && opts.URL != "":
		return errors.New("--exec and --url: give one")
	case opts.Hook != "" && !slices.Contains([]string{hooks.Sync, hooks.Finalize, hooks.Customize}, opts.Hook):
		return fmt.Errorf("--hook %q: sync, finalize or customize", opts.Hook)
	case !slices.Contains([]string{render.OutputYAML, render.OutputJSON, render.OutputRequest}, opts.Output):
		return fmt.Errorf("--output %q: yaml, json or request", opts.Output)
	case opts.MaxChildren < 1:
		return fmt.Errorf("--max-children-per-reply %d: at least 1", opts.MaxChildren)
	}
	return nil
}
