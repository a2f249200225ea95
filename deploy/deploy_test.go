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

	"universalcontroller.dev/uc/internal/natsauth"
	"universalcontroller.dev/uc/schemas/bus"
)

var update = flag.Bool("update", false, "rewrite deploy/crds from schemas/crds, and deploy/nats/auth.conf")

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

// natsAuthConf is deploy/nats/auth.conf: the NATS users of uc's roles, for
// the installation's partitions (UC_PARTITIONS in kustomization.yaml).
const natsAuthConf = "nats/auth.conf"

// TestNATSAuth fails unless deploy/nats/auth.conf is what `uc nats-config`
// prints for the roles, and the password Secret has every role's
// password variable. With -update it rewrites auth.conf.
func TestNATSAuth(t *testing.T) {
	users, err := natsauth.Users(bus.DefaultPartitions)
	if err != nil {
		t.Fatal(err)
	}
	want := natsauth.Config(users)
	if *update {
		if err := os.WriteFile(natsAuthConf, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(natsAuthConf)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("%s differs from `uc nats-config`; run: go test ./deploy -run TestNATSAuth -update", natsAuthConf)
	}
	kust, err := os.ReadFile("kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(kust), fmt.Sprintf("UC_PARTITIONS=%d", bus.DefaultPartitions)) {
		t.Errorf("kustomization.yaml does not set UC_PARTITIONS=%d, the partitions of %s", bus.DefaultPartitions, natsAuthConf)
	}
	env, err := os.ReadFile(natsPasswords)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range users {
		if !strings.Contains(string(env), natsauth.PasswordVariable(u.Name)+"=") {
			t.Errorf("%s has no %s", natsPasswords, natsauth.PasswordVariable(u.Name))
		}
	}
}

// natsPasswords are the NATS users' passwords, the Secret uc-nats-passwords.
const natsPasswords = "nats/passwords.env"
