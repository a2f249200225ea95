package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"

	"universalcontroller.dev/uc/internal/golden"
)

// referenceDir holds the CLI's reference, generated from the commands.
const referenceDir = "../../docs/reference/cli"

// TestCLIReference: docs/reference/cli has one page per command, as
// cobra's generator makes it from the commands' descriptions, examples and
// flags; a change to a command without `go test ./cmd/uc -run
// TestCLIReference -update` (make generate) fails here.
func TestCLIReference(t *testing.T) {
	root := newCLI()
	root.DisableAutoGenTag = true // no date: the page changes with the command only
	var want []string
	for _, c := range append([]*cobra.Command{root}, subcommands(root)...) {
		if !c.IsAvailableCommand() && c != root {
			continue
		}
		c.DisableAutoGenTag = true
		name := strings.ReplaceAll(c.CommandPath(), " ", "_") + ".md"
		want = append(want, name)
		var page bytes.Buffer
		if err := doc.GenMarkdownCustom(c, &page, func(s string) string { return s }); err != nil {
			t.Fatal(err)
		}
		golden.CheckFile(t, filepath.Join(referenceDir, name), page.Bytes())
	}
	entries, err := os.ReadDir(referenceDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != "README.md" && !slices.Contains(want, e.Name()) {
			t.Errorf("%s/%s is the page of no command: remove it", referenceDir, e.Name())
		}
	}
}
