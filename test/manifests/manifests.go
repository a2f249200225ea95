// Package manifests reads uc's install manifests as the objects they
// declare: a YAML stream (Decode, Read), a kustomization such as deploy/
// built with the test bed's kubectl (Kustomize), or the Helm chart's
// rendering (test/helmchart). It finds the objects by kind and name,
// converts them to their Go types, parses the NATS servers' configuration
// as they do, runs `uc <role> -h` for the flags the manifests' variables
// must name, and gives the RBAC deploy/README.md tells a controller's
// author to add.
//
// Its tests check deploy/ without a cluster. test/e2e's TestDeploy runs
// what needs one: the API server's dry run and authorizer, and the roles
// run as the manifests run them.
package manifests

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	natsconf "github.com/nats-io/nats-server/v2/conf"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"universalcontroller.dev/uc/test/testbed"
)

// Namespace is the namespace deploy/ installs uc into.
const Namespace = "uc-system"

// Roles are uc's roles, each a Deployment uc-<role> running `uc <role>`
// as its ServiceAccount uc-<role>.
var Roles = []string{"watcher", "dispatcher", "applier"}

// Set is the objects of some manifests, in their order.
type Set []*unstructured.Unstructured

// Decode decodes the objects of a YAML (or JSON) stream, leaving out empty
// documents, such as those `kubectl kustomize` prints.
func Decode(b []byte) (Set, error) {
	var objs Set
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	for {
		var obj unstructured.Unstructured
		if err := dec.Decode(&obj.Object); errors.Is(err, io.EOF) {
			return objs, nil
		} else if err != nil {
			return nil, err
		}
		if obj.Object != nil {
			objs = append(objs, &obj)
		}
	}
}

// Read decodes the objects of a YAML (or JSON) file.
func Read(path string) (Set, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	objs, err := Decode(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return objs, nil
}

// Kustomize builds the kustomization in dir with the test bed's kubectl
// (make testbed-bins builds it): the objects `kubectl kustomize dir`
// prints.
func Kustomize(ctx context.Context, dir string) (Set, error) {
	kubectl := testbed.CachedBin("kubectl")
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, kubectl, "kustomize", dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("kubectl kustomize %s (make testbed-bins builds %s): %w\n%s", dir, kubectl, err, stderr.String())
	}
	objs, err := Decode(out)
	if err != nil {
		return nil, fmt.Errorf("kubectl kustomize %s: %w", dir, err)
	}
	if len(objs) == 0 {
		return nil, fmt.Errorf("kubectl kustomize %s printed no objects", dir)
	}
	return objs, nil
}

// In is the objects of the set in namespace ("": the cluster-scoped ones).
func (s Set) In(namespace string) Set {
	return s.Filter(func(o *unstructured.Unstructured) bool { return o.GetNamespace() == namespace })
}

// OfKind is the objects of the set of that kind.
func (s Set) OfKind(kind string) Set {
	return s.Filter(func(o *unstructured.Unstructured) bool { return o.GetKind() == kind })
}

// Filter is the objects of the set that keep selects.
func (s Set) Filter(keep func(*unstructured.Unstructured) bool) Set {
	var out Set
	for _, o := range s {
		if keep(o) {
			out = append(out, o)
		}
	}
	return out
}

// Find is the first object of that kind and name, in any namespace (use
// In first to say which), or nil.
func (s Set) Find(kind, name string) *unstructured.Unstructured {
	for _, o := range s {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}

// YAML is the objects' YAML stream, for kubectl apply.
func (s Set) YAML() ([]byte, error) {
	var b bytes.Buffer
	for _, o := range s {
		y, err := yaml.Marshal(o.Object)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", o.GetKind(), o.GetName(), err)
		}
		b.WriteString("---\n")
		b.Write(y)
	}
	return b.Bytes(), nil
}

// As converts an object into its Go type.
func As[T any](u *unstructured.Unstructured) (*T, error) {
	out := new(T)
	if err := k8sruntime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
		return nil, fmt.Errorf("%s %s: %w", u.GetKind(), u.GetName(), err)
	}
	return out, nil
}

// Typed is the object of that kind and name (Find), as its Go type; it
// fails t if there is none or it does not convert.
func Typed[T any](t testing.TB, s Set, kind, name string) *T {
	t.Helper()
	u := s.Find(kind, name)
	if u == nil {
		t.Fatalf("no %s %s", kind, name)
	}
	out, err := As[T](u)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// ConfigMap is the ConfigMap namespace/name of the set: with Secret, the
// set is the testbed.PodObjects of the pods it declares.
func (s Set) ConfigMap(namespace, name string) (*corev1.ConfigMap, error) {
	u := s.In(namespace).Find("ConfigMap", name)
	if u == nil {
		return nil, fmt.Errorf("no ConfigMap %s/%s", namespace, name)
	}
	return As[corev1.ConfigMap](u)
}

// Secret is the Secret namespace/name of the set, its stringData merged
// into its data as the API server stores it.
func (s Set) Secret(namespace, name string) (*corev1.Secret, error) {
	u := s.In(namespace).Find("Secret", name)
	if u == nil {
		return nil, fmt.Errorf("no Secret %s/%s", namespace, name)
	}
	sec, err := As[corev1.Secret](u)
	if err != nil {
		return nil, err
	}
	if len(sec.StringData) > 0 && sec.Data == nil {
		sec.Data = map[string][]byte{}
	}
	for k, v := range sec.StringData {
		sec.Data[k] = []byte(v)
	}
	sec.StringData = nil
	return sec, nil
}

// MisspeltField is the field WithMisspeltField adds.
const MisspeltField = "livenesProbe"

// WithMisspeltField is a copy of a Deployment (or StatefulSet) whose first
// container has a field the API does not know, MisspeltField: what a
// server-side dry run with strict validation must refuse.
func WithMisspeltField(workload *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	bad := workload.DeepCopy()
	containers, _, err := unstructured.NestedSlice(bad.Object, "spec", "template", "spec", "containers")
	if err != nil || len(containers) == 0 {
		return nil, fmt.Errorf("%s %s: no containers (%v)", bad.GetKind(), bad.GetName(), err)
	}
	containers[0].(map[string]any)[MisspeltField] = map[string]any{}
	if err := unstructured.SetNestedSlice(bad.Object, containers, "spec", "template", "spec", "containers"); err != nil {
		return nil, err
	}
	return bad, nil
}

// NATSConf parses a nats.conf as the NATS server does: files are the files
// of its ConfigMap's volume (nats.conf and auth.conf, as a ConfigMap's
// data), auth.conf also in the volume "auth" beside it, where the reloader
// renders it (its variables here from env), and env the variables the
// $VAR references read, set for the rest of t.
func NATSConf(t testing.TB, files, env map[string]string) map[string]any {
	t.Helper()
	dir := t.TempDir()
	for _, sub := range []string{"config", "auth"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, "config", name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		if name == "auth.conf" {
			if err := os.WriteFile(filepath.Join(dir, "auth", name), []byte(text), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
	conf, err := natsconf.ParseFile(filepath.Join(dir, "config", "nats.conf"))
	if err != nil {
		t.Fatalf("nats.conf: %v", err)
	}
	return conf
}

// StatefulSetNATSConf parses the nats.conf that the pods of a NATS
// StatefulSet of the set mount, as their servers do: in the volumes of the
// first Pod (MountNATSPod), with the environment it gets.
func StatefulSetNATSConf(t testing.TB, s Set, sts *appsv1.StatefulSet) map[string]any {
	t.Helper()
	p := MountNATSPod(t, WithNATSTLS(t, s, sts), sts, 0, t.TempDir())
	for k, v := range p.Env {
		t.Setenv(k, v)
	}
	conf, err := natsconf.ParseFile(p.Conf)
	if err != nil {
		t.Fatalf("nats.conf: %v", err)
	}
	return conf
}

// repoRoot is the repository's root directory.
var repoRoot = func() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}()

// BuildUC builds uc (./cmd/uc) into a directory of t's and returns the
// binary's path.
func BuildUC(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "uc")
	build := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "./cmd/uc")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/uc: %v\n%s", err, out)
	}
	return bin
}

var flagLine = regexp.MustCompile(`(?m)^\s+(?:-[a-z], )?--([a-z0-9-]+)`)

// RoleFlags are the flags `uc <role> -h` lists, with ucBin as uc.
func RoleFlags(ctx context.Context, ucBin, role string) (map[string]bool, error) {
	out, _ := exec.CommandContext(ctx, ucBin, role, "-h").CombinedOutput()
	flags := map[string]bool{}
	for _, m := range flagLine.FindAllStringSubmatch(string(out), -1) {
		flags[m[1]] = true
	}
	if !flags["nats-url"] {
		return nil, fmt.Errorf("uc %s -h lists no --nats-url:\n%s", role, out)
	}
	return flags, nil
}

// FlagOf is the flag a variable UC_<NAME> stands for, as uc reads its
// flags from the environment: UC_NATS_URL is --nats-url. ok is false for
// a variable that is not uc's.
func FlagOf(variable string) (flag string, ok bool) {
	name, ok := strings.CutPrefix(variable, "UC_")
	if !ok {
		return "", false
	}
	return strings.ToLower(strings.ReplaceAll(name, "_", "-")), true
}
