// Package scaffold writes a new controller to start a hook of one's own
// from (uc init): a parent kind's CustomResourceDefinition, its
// UniversalController with ConfigMaps as children and a bus-native sync
// hook, the hook in Python (standard library only), a parent to try it
// with, and the sync request uc would send about that parent, made by uc
// render, to try the hook alone.
package scaffold

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"text/template"

	"universalcontroller.dev/uc/internal/render"
)

//go:embed templates
var templates embed.FS

// Options names the new controller.
type Options struct {
	// Kind is the parent kind, in CamelCase: Greeting.
	Kind string
	// Group is its API group (default hooks.example.com), Plural its
	// resource (default the kind in lower case, plus s).
	Group, Plural string
}

// kindPattern is what a kind may be.
var kindPattern = regexp.MustCompile(`^[A-Z][A-Za-z0-9]*$`)

// CheckKind says why kind cannot be a new kind's name, or nil.
func CheckKind(kind string) error {
	if !kindPattern.MatchString(kind) {
		return fmt.Errorf("kind %q: want a name in CamelCase, e.g. Greeting", kind)
	}
	return nil
}

// ErrExists is returned for a directory that exists: uc init writes into
// a new one only.
var ErrExists = errors.New("exists: give another directory")

// Write writes the controller into dir, a directory it creates, and
// returns the files it wrote.
func Write(ctx context.Context, dir string, opts Options) ([]string, error) {
	if err := CheckKind(opts.Kind); err != nil {
		return nil, err
	}
	lower := strings.ToLower(opts.Kind)
	if opts.Group == "" {
		opts.Group = "hooks.example.com"
	}
	if opts.Plural == "" {
		opts.Plural = lower + "s"
	}
	if _, err := os.Stat(dir); err == nil {
		return nil, fmt.Errorf("%s %w", dir, ErrExists)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	data := map[string]string{"Kind": opts.Kind, "Lower": lower, "Group": opts.Group, "Plural": opts.Plural,
		"Controller": lower + "-controller", "Dir": dir}
	files := map[string]string{"crd.yaml": "crd.yaml", "controller.yaml": "controller.yaml", "hook.py": "hook.py", "parent.yaml": lower + ".yaml"}
	var wrote []string
	for _, name := range []string{"crd.yaml", "controller.yaml", "hook.py", "parent.yaml"} {
		t, err := template.ParseFS(templates, "templates/"+name)
		if err != nil {
			return nil, err
		}
		var b bytes.Buffer
		if err := t.Execute(&b, data); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		path := filepath.Join(dir, files[name])
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			return nil, err
		}
		wrote = append(wrote, path)
	}
	// The request uc would send about the parent: what the watcher builds,
	// as uc render makes it (its notes, on the parent's made-up UID, are
	// not news here).
	var request bytes.Buffer
	err := render.Run(ctx, render.Options{Controller: []string{filepath.Join(dir, "controller.yaml")}, CRDs: []string{filepath.Join(dir, "crd.yaml")},
		Parent: filepath.Join(dir, lower+".yaml"), Output: render.OutputRequest}, &request, io.Discard)
	if err != nil {
		return nil, fmt.Errorf("the request of %s: %w", filepath.Join(dir, lower+".yaml"), err)
	}
	path := filepath.Join(dir, "request.json")
	if err := os.WriteFile(path, request.Bytes(), 0o644); err != nil {
		return nil, err
	}
	return append(wrote, path), nil
}
