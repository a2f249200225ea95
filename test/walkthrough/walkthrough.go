// Package walkthrough reads the shell blocks of the pages a newcomer
// follows (the README, docs/getting-started.md): each block is marked,
// either to be run by the tests, in the page's order, or as not run, with a
// reason. TestWalkthrough (test/e2e) and TestNewcomer (test/release) run
// them.
package walkthrough

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
)

// The markers, each on the line before a block's opening fence.
const (
	RunMarker    = "<!-- run by TestWalkthrough (test/e2e/walkthrough_test.go) -->"
	NotRunMarker = "<!-- not run: "
)

// Block is one shell block of a page.
type Block struct {
	Line   int    // of its opening fence, from 1
	Marker string // the line before it, trimmed
	Script string // its lines
}

// Run tells whether the block is marked to run.
func (b Block) Run() bool { return b.Marker == RunMarker }

// Blocks are the shell blocks (```sh) of a page, in order.
func Blocks(page []byte) []Block {
	lines := strings.Split(string(page), "\n")
	var out []Block
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != "```sh" {
			continue
		}
		end := i + 1
		for end < len(lines) && strings.TrimSpace(lines[end]) != "```" {
			end++
		}
		b := Block{Line: i + 1, Script: strings.Join(lines[i+1:min(end, len(lines))], "\n")}
		if i > 0 {
			b.Marker = strings.TrimSpace(lines[i-1])
		}
		out = append(out, b)
		i = end
	}
	return out
}

// Script is the page's blocks marked to run, in order, as one script. The
// blocks with no marker are problems, except those unmarked allows (by
// their index among the page's blocks); so is a page with no block to run.
func Script(name string, page []byte, unmarked func(i int) bool) (string, []error) {
	var script []string
	var problems []error
	for i, b := range Blocks(page) {
		switch {
		case b.Run():
			script = append(script, b.Script)
		case strings.HasPrefix(b.Marker, NotRunMarker), unmarked != nil && unmarked(i):
		default:
			problems = append(problems, fmt.Errorf("%s:%d: a shell block with no marker: %q, or %q and why", name, b.Line, RunMarker, NotRunMarker+"…"))
		}
	}
	if len(script) == 0 {
		problems = append(problems, fmt.Errorf("%s: no block marked to run", name))
	}
	return strings.Join(script, "\n"), problems
}

// Run runs script with bash (-euo pipefail), as one terminal would, in
// dir, with env added to the process's environment and EDITOR=true (a
// walkthrough's edit, done). Its output goes to the file log, not a pipe:
// what it leaves in the background (uc worker &) keeps writing to it, and
// the script's end is bash's. stop kills what it left in the background.
func Run(ctx context.Context, dir, script, log string, env ...string) (stop func(), err error) {
	out, err := os.Create(log)
	if err != nil {
		return func() {}, err
	}
	defer out.Close()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "EDITOR=true"), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Stdout, cmd.Stderr = out, out
	err = cmd.Run()
	stop = func() {
		if cmd.Process != nil {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
	}
	return stop, err
}
