package main

import (
	"cmp"
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

func versionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print uc's version, commit and build date",
		Long: `Prints the version of uc's module, the commit it was built from, whether the
working tree had changes, and the commit's date: what the Go toolchain
stamped in the binary (go version -m shows the same). make build stamps
them; a binary built without version control information says unknown.
uc --version prints the same.`,
		Example: `  uc version`,
		Args:    cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprint(cmd.OutOrStdout(), readVersion())
		},
	}
}

// buildVersion is what the Go toolchain stamped in the binary.
type buildVersion struct {
	version   string // the main module's version: a tag, a pseudo-version, or (devel)
	commit    string // vcs.revision
	date      string // vcs.time: the commit's date, RFC 3339
	modified  bool   // vcs.modified: the working tree had changes
	goVersion string
}

// readVersion reads the binary's build information.
func readVersion() buildVersion {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return buildVersion{}
	}
	return versionOf(info)
}

// versionOf picks uc's version out of a binary's build information.
func versionOf(info *debug.BuildInfo) buildVersion {
	v := buildVersion{version: info.Main.Version, goVersion: info.GoVersion}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			v.commit = s.Value
		case "vcs.time":
			v.date = s.Value
		case "vcs.modified":
			v.modified = s.Value == "true"
		}
	}
	return v
}

// String is the version in lines of "name: value", unknown for what was
// not stamped.
func (v buildVersion) String() string {
	commit := cmp.Or(v.commit, "unknown")
	if v.modified {
		commit += " (modified)"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "uc %s\n", cmp.Or(v.version, "unknown"))
	fmt.Fprintf(&b, "commit: %s\n", commit)
	fmt.Fprintf(&b, "date:   %s\n", cmp.Or(v.date, "unknown"))
	fmt.Fprintf(&b, "go:     %s\n", cmp.Or(v.goVersion, "unknown"))
	return b.String()
}
