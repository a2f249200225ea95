package main

import (
	"fmt"

	"github.com/spf13/cobra"
	"universalcontroller.dev/uc/internal/version"
)

func versionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print uc's version, commit and build date",
		Long: `Prints uc's version, the commit it was built from, whether the working tree
had changes, and the commit's date. A release (make release) says its
version, e.g. 0.1.0; any other build says the version it precedes, e.g.
0.1.0-dev, and the commit the Go toolchain stamped in it (go version -m
shows the same; a build without version control information says unknown).
uc --version prints the same.`,
		Example: `  uc version`,
		Args:    cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprint(cmd.OutOrStdout(), readVersion())
		},
	}
}

// buildVersion is the running binary's version (internal/version), with
// the fields uc run's log and its traces report.
type buildVersion struct {
	version.Info
	version, commit string
}

// readVersion reads the binary's version.
func readVersion() buildVersion {
	v := version.Read()
	return buildVersion{Info: v, version: v.Version, commit: v.Commit}
}
