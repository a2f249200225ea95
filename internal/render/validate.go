package render

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"universalcontroller.dev/uc/core"
)

// Validate checks the controller objects in the files at paths, and in
// the manifests below the directories at paths, against uc's CRDs
// (core.Validate) and writes each problem to out, as "FILE: KIND NAME:
// problem". It returns how many controller objects it checked and how many
// problems it found; other objects, and files below a directory that are
// not manifests, are skipped.
func Validate(paths []string, out io.Writer) (checked, problems int, err error) {
	for _, path := range paths {
		files, named, err := validated(path)
		if err != nil {
			return checked, problems, err
		}
		for _, f := range files {
			objs, err := readFile(f)
			if err != nil && named {
				return checked, problems, err
			}
			for _, o := range objs {
				found, err := core.Validate(o)
				if err != nil {
					return checked, problems, err
				}
				if found == nil && !core.IsControllerObject(o) {
					continue
				}
				checked++
				for _, p := range found {
					problems++
					fmt.Fprintf(out, "%s: %s %s: %s\n", f, o.GetKind(), o.GetName(), p)
				}
			}
		}
	}
	return checked, problems, nil
}

// ReadManifests reads the objects of the files at paths, and of the
// manifests below the directories at paths, as Validate finds them: a file
// below a directory that is not a manifest of objects is skipped.
func ReadManifests(paths ...string) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, path := range paths {
		files, named, err := validated(path)
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			objs, err := readFile(f)
			if err != nil && named {
				return nil, err
			}
			out = append(out, objs...)
		}
	}
	return out, nil
}

// validated are the files Validate reads at path: path itself (named), or
// the manifests below the directory path, but for node_modules.
func validated(path string) (files []string, named bool, err error) {
	info, err := os.Stat(path)
	if err != nil || !info.IsDir() {
		return []string{path}, true, err
	}
	err = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && (d.Name() == "node_modules" || d.Name() == ".git"):
			return filepath.SkipDir
		case !d.IsDir() && slices.Contains([]string{".yaml", ".yml", ".json"}, strings.ToLower(filepath.Ext(p))):
			files = append(files, p)
		}
		return nil
	})
	return files, false, err
}
