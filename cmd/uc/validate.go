package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"universalcontroller.dev/uc/internal/render"
)

func validateCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "validate FILE|DIR...",
		Short: "Check controller objects against uc's schemas, as kubectl --validate=strict would",
		Long: `Checks every UniversalController and UniversalDecorator (and Metacontroller's
CompositeControllers and DecoratorControllers, whose spec is theirs field for
field) in the files and directories given against uc's CustomResourceDefinitions,
without a cluster: a field the schema does not declare (a typo the apiserver
would prune silently) and a value of the wrong type or outside its enum are
each reported with the field's path. Other objects are skipped.

Exits 0 when every controller object is valid, 1 when one is not, 2 on a
wrong command line (a file that does not exist).`,
		Example: `  uc validate examples/python-worker/controller.yaml
  uc validate deploy/examples/`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			checked, problems, err := render.Validate(args, cmd.ErrOrStderr())
			switch {
			case err != nil:
				return err
			case problems > 0:
				fmt.Fprintf(cmd.ErrOrStderr(), "uc validate: %d problems in %d controller objects\n", problems, checked)
				return errLogged
			case checked == 0:
				return errors.New("no controller object in the files given")
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%d controller objects valid\n", checked)
			return nil
		},
	}
}
