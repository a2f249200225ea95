// Package deploy holds the manifests that install uc on a cluster (see
// README.md). This test keeps deploy/crds a faithful copy of schemas/crds;
// test/manifests checks what the manifests hold, and
// test/e2e/deploy_test.go validates them on a real API server.
package deploy

import (
	"bytes"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"universalcontroller.dev/uc/internal/natsauth"
	"universalcontroller.dev/uc/schemas/bus"
)

var update = flag.Bool("update", false, "rewrite deploy/crds and deploy/helm/uc/crds from schemas/crds, and the NATS users of deploy/nats and deploy/helm/uc")

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
// schemas/crds, byte for byte, and a kustomization listing them, and the
// Helm chart's crds/ the same manifests. With -update it makes it so.
func TestCRDs(t *testing.T) {
	want := yamlFiles(t, schemaCRDs)
	if len(want) == 0 {
		t.Fatalf("no CRD manifests in %s", schemaCRDs)
	}
	withKust := maps.Clone(want)
	withKust["kustomization.yaml"] = crdsKustomization(sortedKeys(want))
	const fix = "; run: go test ./deploy -run TestCRDs -update"
	for dir, files := range map[string]map[string][]byte{deployCRDs: withKust, chartCRDs: want} {
		if *update {
			writeCopies(t, dir, files)
		}
		have := yamlFiles(t, dir)
		for _, name := range sortedKeys(files) {
			switch h, ok := have[name]; {
			case !ok:
				t.Errorf("deploy/%s/%s is missing%s", dir, name, fix)
			case !bytes.Equal(h, files[name]):
				t.Errorf("deploy/%s/%s differs from %s%s", dir, name, origin(name), fix)
			}
		}
		for _, name := range sortedKeys(have) {
			if _, ok := files[name]; !ok {
				t.Errorf("deploy/%s/%s is not in schemas/crds%s", dir, name, fix)
			}
		}
	}
}

// chartCRDs are the Helm chart's CRDs, which Helm installs as they are.
const chartCRDs = "helm/uc/crds"

// origin says what a file of deploy/crds is made from.
func origin(name string) string {
	if name == "kustomization.yaml" {
		return "a kustomization listing exactly the manifests of schemas/crds"
	}
	return "schemas/crds/" + name
}

// writeCopies makes dir hold exactly files.
func writeCopies(t *testing.T, dir string, files map[string][]byte) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name := range yamlFiles(t, dir) {
		if _, ok := files[name]; !ok {
			if err := os.Remove(filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
		}
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
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

// chartAuthConf is the same for the Helm chart: its default nats.auth.conf.
const chartAuthConf = "helm/uc/files/auth.conf"

// TestNATSAuth fails unless deploy/nats/auth.conf and the Helm chart's
// files/auth.conf are what `uc nats-config` prints for the roles, and the
// password Secret has every role's password variable. With -update it
// rewrites both files.
func TestNATSAuth(t *testing.T) {
	users, err := natsauth.Users(bus.DefaultPartitions)
	if err != nil {
		t.Fatal(err)
	}
	want := natsauth.Config(users)
	for _, file := range []string{natsAuthConf, chartAuthConf} {
		if *update {
			if err := os.WriteFile(file, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		got, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != want {
			t.Errorf("%s differs from `uc nats-config`; run: go test ./deploy -run TestNATSAuth -update", file)
		}
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
