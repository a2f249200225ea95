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
  hook.py          the sync hook in Python (standard library only), for
                   uc worker --controller <kind>-controller -- python3 hook.py
  <kind>.yaml      a parent to try it with, "hello"
  request.json     the sync request uc would send about it (uc render -o
                   request), to try the hook alone: python3 hook.py < request.json

DIR must not exist.`,
		Example: `  uc init Greeting
  python3 greeting/hook.py < greeting/request.json
  kubectl apply -f greeting/crd.yaml -f greeting/controller.yaml
  kubectl wait --for condition=established crd/greetings.hooks.example.com
  uc worker --controller greeting-controller -- python3 greeting/hook.py &
  kubectl apply -f greeting/greeting.yaml`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Kind = args[0]
			if err := scaffold.CheckKind(opts.Kind); err != nil {
				return err // a usage error: exit 2
			}
			lower := strings.ToLower(opts.Kind)
			plural := opts.Plural
			if plural == "" {
				plural = lower + "s"
			}
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
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "wrote %s\n\n", strings.Join(wrote, " "))
			fmt.Fprintf(out, "  python3 %[1]s/hook.py < %[1]s/request.json      # the hook alone\n", dir)
			fmt.Fprintf(out, "  kubectl apply -f %[1]s/crd.yaml -f %[1]s/controller.yaml\n", dir)
			fmt.Fprintf(out, "  kubectl wait --for condition=established crd/%s.%s\n", plural, opts.Group)
			fmt.Fprintf(out, "  uc worker --controller %s-controller -- python3 %s/hook.py &\n", lower, dir)
			fmt.Fprintf(out, "  kubectl apply -f %s/%s.yaml\n", dir, lower)
			fmt.Fprintf(out, "  kubectl get %s.%s hello -o jsonpath='{.status}'; kubectl get configmap hello -o yaml\n", plural, opts.Group)
			return nil
		},
	}
	c.Flags().StringVar(&opts.Group, "group", "hooks.example.com", "API group of the kind")
	c.Flags().StringVar(&opts.Plural, "plural", "", "resource name of the kind (default: the kind in lower case, plus s)")
	return c
}
