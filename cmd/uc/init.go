package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"universalcontroller.dev/uc/internal/scaffold"
)

func initCommand() *cobra.Command {
	var opts scaffold.Options
	c := &cobra.Command{
		Use:   "init KIND [DIR]",
		Short: "Write a new controller to start a hook of your own from",
		Long: `Writes, in DIR (default: the kind in lower case), a new controller of the
parent kind KIND to start a hook of your own from:

  crd.yaml         the kind (namespaced, version v1; spec and status take any field)
  controller.yaml  its UniversalController, <kind>-controller: ConfigMaps as
                   children, a bus-native sync hook
  the hook         in --language, on its standard library (shell: POSIX sh
                   and jq), served by uc worker --controller <kind>-controller,
                   and its test, which runs it on request.json:
                     python      hook.py, test_hook.py
                     go          main.go, main_test.go, go.mod
                     javascript  hook.js, hook.test.js (Node.js)
                     shell       hook.sh, hook_test.sh
  <kind>.yaml      a parent to try it with, "hello"
  request.json     the sync request uc would send about it (uc render -o
                   request), to try the hook alone

It prints the commands that test the hook and run it on a cluster. DIR must
not exist.`,
		Example: `  uc init Greeting
  python3 -m unittest discover -s greeting
  kubectl apply -f greeting/crd.yaml -f greeting/controller.yaml
  kubectl wait --for condition=established crd/greetings.hooks.example.com
  uc worker --controller greeting-controller -- python3 greeting/hook.py &
  kubectl apply -f greeting/greeting.yaml

  # the hook in Go, and its test
  uc init Greeting --language go
  go test -C greeting`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Kind = args[0]
			if err := opts.Check(); err != nil {
				return err // a usage error: exit 2
			}
			lower := strings.ToLower(opts.Kind)
			dir := lower
			if len(args) == 2 {
				dir = args[1]
			}
			wrote, err := scaffold.Write(cmd.Context(), dir, opts)
			if errors.Is(err, scaffold.ErrExists) {
				return err // a usage error: exit 2
			}
			if err != nil {
				fmt.Fprintln(cmd.ErrOrStderr(), "uc init:", err)
				return errLogged
			}
			run, err := scaffold.CommandsOf(dir, opts.Language)
			if err != nil {
				return err // not here: opts.Check took the language
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "wrote %s\n\n", strings.Join(wrote, " "))
			fmt.Fprintf(out, "The hook, without a cluster:\n")
			fmt.Fprintf(out, "  %s      # its test\n", run.Test)
			fmt.Fprintf(out, "  %s < %s/request.json      # its reply, alone\n", run.Hook, dir)
			fmt.Fprintf(out, "On the test bed (make testbed, then source .testbed/env) or any cluster with uc:\n")
			fmt.Fprintf(out, "  kubectl apply -f %[1]s/crd.yaml -f %[1]s/controller.yaml\n", dir)
			fmt.Fprintf(out, "  kubectl wait --for condition=established crd/%s.%s\n", opts.Plural, opts.Group)
			fmt.Fprintf(out, "  uc worker --controller %s-controller -- %s &\n", lower, run.Hook)
			fmt.Fprintf(out, "  kubectl apply -f %s/%s.yaml\n", dir, lower)
			fmt.Fprintf(out, "  kubectl get %s.%s hello -o jsonpath='{.status}'; kubectl get configmap hello -o yaml\n", opts.Plural, opts.Group)
			return nil
		},
	}
	c.Flags().StringVar(&opts.Group, "group", "hooks.example.com", "API group of the kind")
	c.Flags().StringVar(&opts.Plural, "plural", "", "resource name of the kind (default: the kind in lower case, plus s)")
	c.Flags().StringVar(&opts.Language, "language", scaffold.Languages[0], "the hook's language: "+strings.Join(scaffold.Languages, ", "))
	return c
}
