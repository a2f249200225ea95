// Package scaffold writes a new controller to start a hook of one's own
// from (uc init): a parent kind's CustomResourceDefinition, its
// UniversalController with ConfigMaps as children and a bus-native sync
// hook, the hook in Python, Go, JavaScript or shell (each on its language's
// standard library, plus jq for shell) with a test of it in the same
// language, a parent to try it with, and the sync request uc would send
// about that parent, made by uc render, which the hook's test answers.
package scaffold

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"text/template"

	"universalcontroller.dev/uc/internal/render"
)

// templates holds the files of every scaffold (crd.yaml, controller.yaml,
// parent.yaml) and, in a directory per language, the hook and its test.
// A template whose file would be Go's own (a .go file, a go.mod) is named
// with .tmpl after it, so that Go's tools take it for no package or module
// of uc's.
//
//go:embed templates
var templates embed.FS

// Options names the new controller.
type Options struct {
	// Kind is the parent kind, in CamelCase: Greeting.
	Kind string
	// Group is its API group (default hooks.example.com), Plural its
	// resource (default the kind in lower case, plus s).
	Group, Plural string
	// Language is the hook's, one of Languages (default python).
	Language string
}

// A language is how the hook written in it is run: shell commands from the
// directory uc init ran in, %[1]s for the controller's directory.
type language struct {
	// test runs the hook's test, hook the hook on a request on its
	// standard input, as uc worker and uc render --exec do.
	test, hook string
}

var languages = map[string]language{
	"python":     {test: "python3 -m unittest discover -s %[1]s", hook: "python3 %[1]s/hook.py"},
	"go":         {test: "go test -C %[1]s", hook: "go run -C %[1]s ."},
	"javascript": {test: "node --test %[1]s/hook.test.js", hook: "node %[1]s/hook.js"},
	"shell":      {test: "sh %[1]s/hook_test.sh", hook: "sh %[1]s/hook.sh"},
}

// Languages are the languages uc init writes a hook in, the default first.
var Languages = []string{"python", "go", "javascript", "shell"}

// Commands are what try the hook of a controller written in dir, as shell
// commands from the directory uc init ran in.
type Commands struct {
	// Test runs the hook's test on request.json; Hook runs the hook on a
	// request on its standard input (uc worker -- Hook).
	Test, Hook string
}

// CommandsOf is the commands of the hook in lang of a controller written in
// dir.
func CommandsOf(dir, lang string) (Commands, error) {
	l, ok := languages[lang]
	if !ok {
		return Commands{}, fmt.Errorf("language %q: want one of %s", lang, strings.Join(Languages, ", "))
	}
	return Commands{Test: fmt.Sprintf(l.test, dir), Hook: fmt.Sprintf(l.hook, dir)}, nil
}

// kindPattern is what a kind may be.
var kindPattern = regexp.MustCompile(`^[A-Z][A-Za-z0-9]*$`)

// Check says why opts cannot name a new controller, or nil, once its
// defaults are filled in.
func (opts *Options) Check() error {
	if !kindPattern.MatchString(opts.Kind) {
		return fmt.Errorf("kind %q: want a name in CamelCase, e.g. Greeting", opts.Kind)
	}
	if opts.Group == "" {
		opts.Group = "hooks.example.com"
	}
	if opts.Plural == "" {
		opts.Plural = strings.ToLower(opts.Kind) + "s"
	}
	if opts.Language == "" {
		opts.Language = Languages[0]
	}
	_, err := CommandsOf("", opts.Language)
	return err
}

// ErrExists is returned for a directory that exists: uc init writes into
// a new one only.
var ErrExists = errors.New("exists: give another directory")

// The parent the scaffold tries the hook with, and the message the hook
// copies from its spec into its ConfigMap.
const (
	parentName    = "hello"
	parentMessage = "Hello from my own hook"
)

// Write writes the controller into dir, a directory it creates, and
// returns the files it wrote. When it fails after it made dir, it removes
// dir, so that uc init can be run again as it was.
func Write(ctx context.Context, dir string, opts Options) (wrote []string, err error) {
	if err := opts.Check(); err != nil {
		return nil, err
	}
	cmds, err := CommandsOf(dir, opts.Language)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(dir); err == nil {
		return nil, fmt.Errorf("%s %w", dir, ErrExists)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(dir) // the error says why
		}
	}()
	lower := strings.ToLower(opts.Kind)
	data := map[string]string{"Kind": opts.Kind, "Lower": lower, "Group": opts.Group, "Plural": opts.Plural,
		"Controller": lower + "-controller", "Hook": cmds.Hook, "Parent": parentName, "Message": parentMessage}
	// Each template, and the name of the file it makes.
	files := map[string]string{"crd.yaml": "crd.yaml", "controller.yaml": "controller.yaml", "parent.yaml": lower + ".yaml"}
	hookFiles, err := fs.ReadDir(templates, "templates/"+opts.Language)
	if err != nil {
		return nil, err
	}
	for _, f := range hookFiles {
		files[path.Join(opts.Language, f.Name())] = strings.TrimSuffix(f.Name(), ".tmpl")
	}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		file := filepath.Join(dir, files[name])
		if err := writeTemplate(file, name, data); err != nil {
			return nil, err
		}
		wrote = append(wrote, file)
	}
	// The request uc would send about the parent: what the watcher builds,
	// as uc render makes it (its notes, on the parent's made-up UID, are
	// not news here).
	var request bytes.Buffer
	err = render.Run(ctx, render.Options{Controller: []string{filepath.Join(dir, "controller.yaml")}, CRDs: []string{filepath.Join(dir, "crd.yaml")},
		Parent: filepath.Join(dir, lower+".yaml"), Output: render.OutputRequest}, &request, io.Discard)
	if err != nil {
		return nil, fmt.Errorf("the request of %s: %w", filepath.Join(dir, lower+".yaml"), err)
	}
	file := filepath.Join(dir, "request.json")
	if err := os.WriteFile(file, request.Bytes(), 0o644); err != nil {
		return nil, err
	}
	return append(wrote, file), nil
}

// writeTemplate writes the template name, executed on data, to file.
func writeTemplate(file, name string, data map[string]string) error {
	t, err := template.ParseFS(templates, "templates/"+name)
	if err != nil {
		return err
	}
	t.Option("missingkey=error") // not "<no value>" in a file
	var b bytes.Buffer
	if err := t.Execute(&b, data); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return os.WriteFile(file, b.Bytes(), 0o644)
}
