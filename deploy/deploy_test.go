// Package deploy holds the manifests that install uc on a cluster (see
// README.md). This test keeps deploy/crds a faithful copy of schemas/crds;
// test/e2e/deploy_test.go validates the manifests on a real API server.
package deploy

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite deploy/crds from schemas/crds")

const (
	schemaCRDs = "../schemas/crds"
	deployCRDs = "crds"
)

// crdsKustomization is deploy/crds/kustomization.yaml for the given files.
func crdsKustomization(files []string) []byte {
	var b bytes.Buffer
	b.WriteString(`# uc's CustomResourceDefinitions. The YAML files here are copies of
# schemas/crds/*.yaml, because kustomize loads nothing from outside a
# kustomization's root. Never edit them: after "go generate ./schemas/...",
# refresh them with
#
#	go test ./deploy -run TestCRDs -update
#
# TestCRDs (deploy/deploy_test.go) fails while they differ from schemas/crds.
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
`)
	for _, f := range files {
		fmt.Fprintf(&b, "  - %s\n", f)
	}
	return b.Bytes()
}

// TestCRDs fails unless deploy/crds holds exactly the manifests of
// schemas/crds, byte for byte, and a kustomization listing them. With
// -update it makes it so.
func TestCRDs(t *testing.T) {
	want := yamlFiles(t, schemaCRDs)
	if len(want) == 0 {
		t.Fatalf("no CRD manifests in %s", schemaCRDs)
	}
	names := sortedKeys(want)
	wantKust := crdsKustomization(names)
	if *update {
		if err := os.MkdirAll(deployCRDs, 0o755); err != nil {
			t.Fatal(err)
		}
		for name := range yamlFiles(t, deployCRDs) {
			if _, ok := want[name]; !ok && name != "kustomization.yaml" {
				if err := os.Remove(filepath.Join(deployCRDs, name)); err != nil {
					t.Fatal(err)
				}
			}
		}
		for name, b := range want {
			if err := os.WriteFile(filepath.Join(deployCRDs, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(deployCRDs, "kustomization.yaml"), wantKust, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	have := yamlFiles(t, deployCRDs)
	const fix = "; run: go test ./deploy -run TestCRDs -update"
	for _, name := range names {
		switch h, ok := have[name]; {
		case !ok:
			t.Errorf("deploy/crds/%s is missing%s", name, fix)
		case !bytes.Equal(h, want[name]):
			t.Errorf("deploy/crds/%s differs from schemas/crds/%s%s", name, name, fix)
		}
	}
	for name, b := range have {
		switch _, ok := want[name]; {
		case name == "kustomization.yaml":
			if !bytes.Equal(b, wantKust) {
				t.Errorf("deploy/crds/kustomization.yaml does not list exactly %s%s", strings.Join(names, ", "), fix)
			}
		case !ok:
			t.Errorf("deploy/crds/%s is not in schemas/crds%s", name, fix)
		}
	}
}

// yamlFiles reads every *.yaml file of dir by name.
func yamlFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		files[filepath.Base(p)] = b
	}
	return files
}

func sortedKeys(m map[string][]byte) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
