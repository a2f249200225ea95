// Package docs checks the repository's Markdown so that it cannot rot
// silently: every relative link, and every repository path a page names
// in backticks, must lead somewhere that exists.
package docs

import (
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"unicode"
)

// topLevel are the repository's top-level directories. A backticked
// span that starts with one of them and a "/" (`examples/foo`,
// `docs/bus.md`, `cmd/uc/`) is taken for a repository path and must exist.
// TestTopLevelDirsExist keeps the list honest.
var topLevel = []string{
	"applier", "cmd", "core", "deploy", "dispatcher", "docs", "examples",
	"hack", "internal", "schemas", "sdk", "test", "watcher",
}

// outputs are paths under topLevel that the docs name but the repository
// does not hold, because a command writes them; the value is the reason.
// Build outputs outside topLevel (`bin/uc`, `.testbed/env`) are not
// checked at all. Keep this list short: a path that is neither in the
// repository nor an output is a broken one.
var outputs = map[string]string{}

// skipDirs are never searched for Markdown.
var skipDirs = map[string]bool{
	".git":         true, // git's own files
	"node_modules": true, // npm's dependencies (sdk/js, examples/js-catset)
}

// repoRoot is the repository's root: two levels up from test/docs.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("%s is not the repository's root: %v", root, err)
	}
	return root
}

// markdownFiles lists every *.md file under root, relative to it.
func markdownFiles(root string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if skipDirs[d.Name()] {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(d.Name(), ".md") {
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	sort.Strings(files)
	return files, err
}

// TestLinks checks every Markdown file of the repository: its relative
// links ([x](path), [x](path#anchor), [x](#anchor)) lead to a file or
// directory that exists, and to a heading of that file when they name an
// anchor; and every repository path it names in backticks, outside fenced
// code blocks, exists.
func TestLinks(t *testing.T) {
	root := repoRoot(t)
	files, err := markdownFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 10 {
		t.Fatalf("found only %d Markdown files under %s: %v", len(files), root, files)
	}
	c := newChecker(root)
	for _, file := range files {
		t.Run(file, func(t *testing.T) {
			for _, problem := range c.check(file) {
				t.Error(problem)
			}
		})
	}
}

// TestTopLevelDirsExist: every directory of topLevel is one of the
// repository's, so that no path check is silently off.
func TestTopLevelDirsExist(t *testing.T) {
	root := repoRoot(t)
	for _, dir := range topLevel {
		if fi, err := os.Stat(filepath.Join(root, dir)); err != nil || !fi.IsDir() {
			t.Errorf("topLevel names %q, which is not a directory of the repository", dir)
		}
	}
}

// TestChecker shows that the checker fails where it should, on a small
// repository of its own.
func TestChecker(t *testing.T) {
	root := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		path := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("docs/target.md", "# Target page\n\n## The `uc run` command: one process\n\n## Twice\n\n## Twice\n\n```\n## not a heading\n```\n")
	write("examples/foo/README.md", "# Foo\n")
	write("cmd/uc/main.go", "package main\n")

	tests := []struct {
		name, page string
		problems   int
	}{
		{"a link to a file", "[t](docs/target.md)", 0},
		{"a link to a directory", "[foo](examples/foo)", 0},
		{"a link to a missing file", "[t](docs/nosuch.md)", 1},
		{"a link to a heading", "[t](docs/target.md#the-uc-run-command-one-process)", 0},
		{"a link to a repeated heading", "[t](docs/target.md#twice-1)", 0},
		{"a link to a missing heading", "[t](docs/target.md#nosuch)", 1},
		{"a heading in a code block is none", "[t](docs/target.md#not-a-heading)", 1},
		{"a link to a heading of this page", "# Here\n\n[h](#here)", 0},
		{"a link to a missing heading of this page", "# Here\n\n[h](#there)", 1},
		{"a link split over two lines", "[the\ntarget](docs/nosuch.md)", 1},
		{"an external link", "[x](https://example.com/nosuch)", 0},
		{"a link in inline code is none", "`[t](docs/nosuch.md)`", 0},
		{"a repository path", "see `cmd/uc/main.go` and `examples/foo/`", 0},
		{"a missing repository path", "see `cmd/uc/nosuch.go`", 1},
		{"a missing path in a link's text", "[`examples/nosuch`](examples/foo)", 1},
		{"a path in a fenced block is not checked", "```sh\ncat cmd/uc/nosuch.go `cmd/uc/nosuch.go`\n```", 0},
		{"a command is not a path", "`go run ./cmd/nosuch`", 0},
		{"a path outside the known directories", "`bin/uc`", 0},
		{"a Go package pattern", "`examples/...`", 0},
		{"a glob that matches", "`cmd/uc/*.go`", 0},
		{"a glob that matches nothing", "`cmd/uc/*.py`", 1},
		{"an output", "`cmd/uc/written.json`", 0},
	}
	c := newChecker(root)
	c.knownDirs = map[string]bool{"cmd": true, "docs": true, "examples": true}
	c.outputs = map[string]string{"cmd/uc/written.json": "a command writes it"}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			write("page.md", tt.page+"\n")
			c.headings = map[string]map[string]bool{}
			problems := c.check("page.md")
			if len(problems) != tt.problems {
				t.Errorf("%q: %d problems, want %d: %q", tt.page, len(problems), tt.problems, problems)
			}
		})
	}
}

// checker checks Markdown files of one repository.
type checker struct {
	root      string
	knownDirs map[string]bool
	outputs   map[string]string
	// headings caches the anchors of each Markdown file read, by path.
	headings map[string]map[string]bool
}

func newChecker(root string) *checker {
	known := map[string]bool{}
	for _, d := range topLevel {
		known[d] = true
	}
	return &checker{root: root, knownDirs: known, outputs: outputs, headings: map[string]map[string]bool{}}
}

// check returns the problems of one file (a path relative to the root).
func (c *checker) check(file string) []string {
	b, err := os.ReadFile(filepath.Join(c.root, filepath.FromSlash(file)))
	if err != nil {
		return []string{err.Error()}
	}
	var problems []string
	report := func(p paragraph, at int, what, problem string) {
		line := p.line + strings.Count(p.text[:at], "\n")
		problems = append(problems, fmt.Sprintf("%s:%d: %s: %s", file, line, what, problem))
	}
	for _, p := range paragraphs(string(b)) {
		// Links in code spans are none: blank the spans out first.
		text := codeSpan.ReplaceAllStringFunc(p.text, func(s string) string { return strings.Repeat(" ", len(s)) })
		for _, re := range []*regexp.Regexp{link, refDef} {
			for _, m := range re.FindAllStringSubmatchIndex(text, -1) {
				target := text[m[2]:m[3]]
				if problem := c.checkLink(file, target); problem != "" {
					report(p, m[0], "link "+target, problem)
				}
			}
		}
		for _, m := range codeSpan.FindAllStringSubmatchIndex(p.text, -1) {
			span := strings.TrimSpace(p.text[m[4]:m[5]])
			if problem := c.checkPath(file, span); problem != "" {
				report(p, m[0], "`"+span+"`", problem)
			}
		}
	}
	return problems
}

var (
	// link is an inline link or image, [text](target) or
	// [text](target "title"), with the target in group 1.
	link = regexp.MustCompile(`\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	// refDef is a reference link's definition, [label]: target.
	refDef = regexp.MustCompile(`(?m)^ {0,3}\[[^\]]+\]:\s*<?([^\s>]+)>?`)
	// codeSpan is an inline code span: a run of backticks, its content
	// (which may span lines of a paragraph), the same run again.
	codeSpan = regexp.MustCompile("(`+)([^`]+?)(`+)")
	// scheme starts an absolute URL (https:, mailto:).
	scheme = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
	// pathLike is what a repository path is made of; "*" for a glob.
	pathLike = regexp.MustCompile(`^[A-Za-z0-9._/*-]+$`)
	// lineAnchor is GitHub's anchor of a line of a file that is not
	// Markdown (#L10, #L10-L20).
	lineAnchor = regexp.MustCompile(`^L\d+(-L\d+)?$`)
)

// checkLink checks one link target of file; "" when it is fine.
func (c *checker) checkLink(file, target string) string {
	if scheme.MatchString(target) || strings.HasPrefix(target, "//") {
		return "" // an absolute URL: not ours to check
	}
	pathPart, anchor, _ := strings.Cut(target, "#")
	pathPart, err := url.PathUnescape(pathPart)
	if err != nil {
		return err.Error()
	}
	var rel string
	switch {
	case pathPart == "":
		rel = file // #anchor: this page
	case strings.HasPrefix(pathPart, "/"):
		rel = filepath.ToSlash(filepath.Clean(strings.TrimPrefix(pathPart, "/")))
	default:
		rel = filepath.ToSlash(filepath.Join(filepath.Dir(file), pathPart))
	}
	if rel == ".." || strings.HasPrefix(rel, "../") {
		return "leads out of the repository"
	}
	fi, err := os.Stat(filepath.Join(c.root, filepath.FromSlash(rel)))
	if err != nil {
		return "no such file or directory"
	}
	if anchor == "" {
		return ""
	}
	if fi.IsDir() || !strings.HasSuffix(rel, ".md") {
		if lineAnchor.MatchString(anchor) && !fi.IsDir() {
			return ""
		}
		return "an anchor on what is not a Markdown file"
	}
	anchors, err := c.anchors(rel)
	if err != nil {
		return err.Error()
	}
	if !anchors[anchor] {
		return fmt.Sprintf("%s has no heading with the anchor #%s", rel, anchor)
	}
	return ""
}

// checkPath checks the content of one code span of file: if it names a
// repository path, that path exists. "" when it is fine or not a path.
func (c *checker) checkPath(file, span string) string {
	p := strings.TrimPrefix(span, "./")
	first, _, ok := strings.Cut(p, "/")
	if !ok || !c.knownDirs[first] || !pathLike.MatchString(p) {
		return "" // not a repository path: a command, a subject, a type
	}
	if strings.Contains(p, "...") {
		return "" // a Go package pattern (`examples/...`), not a path
	}
	p = strings.TrimSuffix(p, "/")
	if _, ok := c.outputs[p]; ok {
		return ""
	}
	if strings.Contains(p, "*") {
		matches, err := filepath.Glob(filepath.Join(c.root, filepath.FromSlash(p)))
		if err != nil {
			return err.Error()
		}
		if len(matches) == 0 {
			return "matches no file of the repository"
		}
		return ""
	}
	if _, err := os.Stat(filepath.Join(c.root, filepath.FromSlash(p))); err == nil {
		return ""
	}
	// An example's README may name a path in its own directory
	// (`cmd/configmap-propagation-hook` in examples/configmap-propagation).
	if _, err := os.Stat(filepath.Join(c.root, filepath.FromSlash(filepath.Dir(file)), filepath.FromSlash(p))); err == nil && filepath.Dir(file) != "." {
		return ""
	}
	return "no such file or directory in the repository"
}

// anchors returns the anchors of a Markdown file's headings, as GitHub
// makes them.
func (c *checker) anchors(rel string) (map[string]bool, error) {
	if a, ok := c.headings[rel]; ok {
		return a, nil
	}
	b, err := os.ReadFile(filepath.Join(c.root, filepath.FromSlash(rel)))
	if err != nil {
		return nil, err
	}
	a := map[string]bool{}
	seen := map[string]int{}
	for _, h := range headings(string(b)) {
		slug := slugify(h)
		if n := seen[slug]; n > 0 {
			a[fmt.Sprintf("%s-%d", slug, n)] = true
		} else {
			a[slug] = true
		}
		seen[slug]++
	}
	c.headings[rel] = a
	return a, nil
}

// paragraph is a run of non-blank lines outside fenced code blocks, and
// the line it starts on.
type paragraph struct {
	text string
	line int
}

// paragraphs splits Markdown into its paragraphs (table rows and list
// items included), leaving out fenced code blocks. Links and code spans
// may span lines of a paragraph, never two paragraphs.
func paragraphs(md string) []paragraph {
	var out []paragraph
	var cur []string
	start := 0
	flush := func() {
		if len(cur) > 0 {
			out = append(out, paragraph{strings.Join(cur, "\n"), start})
		}
		cur = nil
	}
	fence := ""
	for i, line := range strings.Split(md, "\n") {
		trimmed := strings.TrimLeft(line, " \t")
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) && strings.Trim(trimmed, fence[:1]) == "" {
				fence = ""
			}
			continue
		}
		if f := fenceOpening(trimmed); f != "" {
			flush()
			fence = f
			continue
		}
		if trimmed == "" {
			flush()
			continue
		}
		if len(cur) == 0 {
			start = i + 1
		}
		cur = append(cur, line)
	}
	flush()
	return out
}

// fenceOpening returns the fence (``` or ~~~, or longer) a line opens, or "".
func fenceOpening(trimmed string) string {
	for _, ch := range []string{"`", "~"} {
		n := len(trimmed) - len(strings.TrimLeft(trimmed, ch))
		if n >= 3 {
			return strings.Repeat(ch, n)
		}
	}
	return ""
}

// headings returns the text of a Markdown file's ATX headings (# Title),
// outside fenced code blocks.
func headings(md string) []string {
	var out []string
	for _, p := range paragraphs(md) {
		for _, line := range strings.Split(p.text, "\n") {
			trimmed := strings.TrimLeft(line, " ")
			if len(line)-len(trimmed) > 3 || !strings.HasPrefix(trimmed, "#") {
				continue
			}
			level := len(trimmed) - len(strings.TrimLeft(trimmed, "#"))
			rest := trimmed[level:]
			if level > 6 || (rest != "" && rest[0] != ' ' && rest[0] != '\t') {
				continue
			}
			rest = strings.TrimSpace(rest)
			// A closing sequence of #s is not part of the heading.
			if t := strings.TrimRight(rest, "#"); t != rest && (t == "" || strings.HasSuffix(t, " ")) {
				rest = strings.TrimSpace(t)
			}
			out = append(out, rest)
		}
	}
	return out
}

// mdLink is a link in a heading, whose text alone is the heading's.
var mdLink = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)

// slugify makes a heading's anchor as GitHub does: the heading's text,
// lower case, with every character but letters, digits, marks, "-" and
// "_" dropped and every space made a "-".
func slugify(heading string) string {
	text := mdLink.ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
