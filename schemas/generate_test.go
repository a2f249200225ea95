package schemas

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// outputFlag is the controller-gen argument that names the directory the CRD
// manifests are written to.
const outputFlag = "output:crd:dir="

// TestGeneratedCRDsUpToDate runs the go:generate command of generate.go,
// with its output directed to a temporary directory, and fails if the result
// differs from the checked-in manifests.
func TestGeneratedCRDsUpToDate(t *testing.T) {
	args, checkedIn := generateCommand(t)
	tmp := t.TempDir()
	for i, a := range args {
		if strings.HasPrefix(a, outputFlag) {
			args[i] = outputFlag + tmp
		}
	}

	// Like go generate, run in the package directory. go test puts its own
	// GOROOT/bin first in PATH, so "go" is the toolchain running this test.
	cmd := exec.CommandContext(t.Context(), args[0], args[1:]...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out.String())
	}

	want := yamlFiles(t, tmp)
	have := yamlFiles(t, checkedIn)
	if len(want) == 0 {
		t.Fatalf("%s generated no manifests", strings.Join(args, " "))
	}
	var problems []string
	for _, name := range sortedKeys(want, have) {
		path := filepath.ToSlash(filepath.Join("schemas", checkedIn, name))
		w, inWant := want[name]
		h, inHave := have[name]
		switch {
		case !inHave:
			problems = append(problems, fmt.Sprintf("%s is missing", path))
		case !inWant:
			problems = append(problems, fmt.Sprintf("%s is no longer generated; delete it", path))
		case !bytes.Equal(w, h):
			problems = append(problems, fmt.Sprintf("%s is stale:\n--- %s (checked in)\n+++ %s (generated)\n%s",
				path, path, path, lineDiff(string(h), string(w))))
		}
	}
	if len(problems) > 0 {
		t.Errorf("generated files are out of date; run go generate ./schemas/... and commit the result.\n\n%s",
			strings.Join(problems, "\n\n"))
	}
}

// generateCommand returns the arguments of the controller-gen go:generate
// line in generate.go and the output directory it names.
func generateCommand(t *testing.T) (args []string, outDir string) {
	t.Helper()
	f, err := os.Open("generate.go")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "//go:generate ")
		if !ok || !strings.Contains(line, "controller-gen") {
			continue
		}
		if args != nil {
			t.Fatal("generate.go has more than one controller-gen go:generate line; teach this test about it")
		}
		if strings.ContainsAny(line, "\"`$") {
			// go generate would unquote and expand these; this test doesn't.
			t.Fatalf("go:generate line uses quoting or $VARIABLES; teach this test about it: %s", line)
		}
		args = strings.Fields(line)
		for _, a := range args {
			if dir, ok := strings.CutPrefix(a, outputFlag); ok {
				if outDir != "" {
					t.Fatalf("go:generate line has more than one %s argument: %s", outputFlag, line)
				}
				outDir = dir
			}
		}
		if outDir == "" {
			t.Fatalf("go:generate line has no %s argument: %s", outputFlag, line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if args == nil {
		t.Fatal("generate.go has no controller-gen go:generate line")
	}
	return args, filepath.Clean(outDir)
}

// yamlFiles reads the *.yaml files of dir, by name.
func yamlFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	files := make(map[string][]byte, len(paths))
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		files[filepath.Base(p)] = data
	}
	return files
}

func sortedKeys(ms ...map[string][]byte) []string {
	var keys []string
	for _, m := range ms {
		for k := range m {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

// diffContext is the number of unchanged lines shown around a change, and
// diffMaxLines caps the length of a diff.
const (
	diffContext  = 3
	diffMaxLines = 200
)

// lineDiff returns a unified-style diff from a to b: hunks of lines prefixed
// with " ", "-" or "+".
func lineDiff(a, b string) string {
	x, y := splitLines(a), splitLines(b)
	if len(x)*len(y) > 25_000_000 {
		for i := range min(len(x), len(y)) {
			if x[i] != y[i] {
				return fmt.Sprintf("first difference at line %d:\n-%s+%s", i+1, x[i], y[i])
			}
		}
		return fmt.Sprintf("lengths differ: %d lines, %d lines", len(x), len(y))
	}

	// lcs[i][j] is the length of the longest common subsequence of x[i:]
	// and y[j:].
	lcs := make([][]int32, len(x)+1)
	for i := range lcs {
		lcs[i] = make([]int32, len(y)+1)
	}
	for i := len(x) - 1; i >= 0; i-- {
		for j := len(y) - 1; j >= 0; j-- {
			if x[i] == y[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}

	type op struct {
		kind byte // ' ', '-' or '+'
		text string
		i, j int // line indexes in x and y before this op
	}
	var ops []op
	i, j := 0, 0
	for i < len(x) || j < len(y) {
		switch {
		case i < len(x) && j < len(y) && x[i] == y[j]:
			ops = append(ops, op{' ', x[i], i, j})
			i, j = i+1, j+1
		case j == len(y) || (i < len(x) && lcs[i+1][j] >= lcs[i][j+1]):
			ops = append(ops, op{'-', x[i], i, j})
			i++
		default:
			ops = append(ops, op{'+', y[j], i, j})
			j++
		}
	}

	var sb strings.Builder
	lines := 0
	for k := 0; k < len(ops); {
		if ops[k].kind == ' ' {
			k++
			continue
		}
		// A hunk: from diffContext lines before this change to diffContext
		// lines after the last change that is at most 2*diffContext
		// unchanged lines further on.
		start := max(0, k-diffContext)
		end, same := k, 0
		for end < len(ops) && same <= 2*diffContext {
			if ops[end].kind == ' ' {
				same++
			} else {
				same = 0
			}
			end++
		}
		end -= max(0, same-diffContext)
		var nx, ny int
		for _, o := range ops[start:end] {
			if o.kind != '+' {
				nx++
			}
			if o.kind != '-' {
				ny++
			}
		}
		fmt.Fprintf(&sb, "@@ -%d,%d +%d,%d @@\n", ops[start].i+1, nx, ops[start].j+1, ny)
		for _, o := range ops[start:end] {
			if lines++; lines > diffMaxLines {
				sb.WriteString("... (diff truncated)\n")
				return sb.String()
			}
			sb.WriteByte(o.kind)
			sb.WriteString(o.text)
			if !strings.HasSuffix(o.text, "\n") {
				sb.WriteString("\n\\ No newline at end of file\n")
			}
		}
		k = end
	}
	return sb.String()
}

// splitLines splits s after each newline.
func splitLines(s string) []string {
	lines := strings.SplitAfter(s, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}
