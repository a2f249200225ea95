package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	natsconf "github.com/nats-io/nats-server/v2/conf"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"

	"universalcontroller.dev/uc/examples/foo"
	"universalcontroller.dev/uc/internal/natsauth"
	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/crds"
	"universalcontroller.dev/uc/schemas/v1alpha1"
	hook "universalcontroller.dev/uc/sdk/go"
	"universalcontroller.dev/uc/test/testbed"
)

// The install manifests (deploy/) and what the tests expect of them.
const (
	deployNamespace      = "uc-system"
	deployImage          = "ghcr.io/universalcontroller/uc:latest"
	deployAggregateLabel = "universalcontroller.dev/aggregate-to-" // + role
	deployGadgetUC       = "deploy-gadget-controller"
)

// deployRoles are the uc roles deploy/ runs, each a Deployment uc-<role>
// with the ServiceAccount uc-<role>, and how many replicas it has.
var deployRoles = []struct {
	role     string
	replicas int32
}{{"watcher", 2}, {"dispatcher", 1}, {"applier", 3}}

var deployGadgetGVR = schema.GroupVersionResource{Group: "deploy.e2e.universalcontroller.dev", Version: "v1", Resource: "gadgets"}

// TestDeploy checks deploy/, the manifests of `kubectl apply -k deploy/`,
// on the test bed: what they hold, that the API server accepts every
// object (server-side dry run), that the RBAC is least privilege, and that
// the roles, run with exactly the flags and environment the manifests give
// them and with their ServiceAccounts' rights, run a controller end to end
// on a NATS cluster configured as the manifests configure it.
func TestDeploy(t *testing.T) {
	m := deployBuild(t)
	t.Run("Manifests", func(t *testing.T) { deployCheckManifests(t, m) })
	t.Run("ServerDryRun", func(t *testing.T) { deployDryRun(t, m) })

	// The test bed's controller manager does not aggregate ClusterRoles;
	// this one does only that.
	deployStartAggregator(t)
	if _, err := deployKubectl(t, m.yamlOf(func(u *unstructured.Unstructured) bool {
		return u.GetKind() != "Deployment" && u.GetKind() != "StatefulSet"
	}), "apply", "-f", "-"); err != nil {
		t.Fatalf("install deploy/ without its workloads: %v", err)
	}
	if !t.Run("LeastPrivilege", deployLeastPrivilege) {
		return
	}
	t.Run("RoleProcesses", func(t *testing.T) { deployRoleProcesses(t, m) })
}

// deployManifests are the objects `kubectl kustomize deploy/` prints.
type deployManifests struct{ objs []*unstructured.Unstructured }

func deployBuild(t *testing.T) *deployManifests { return deployBuildDir(t, "deploy") }

// deployBuildDir builds the kustomization in dir (absolute, or relative to
// the repository).
func deployBuildDir(t *testing.T, dir string) *deployManifests {
	out, err := deployKubectl(t, nil, "kustomize", dir)
	if err != nil {
		t.Fatalf("kubectl kustomize %s: %v", dir, err)
	}
	objs, err := deployDecode([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) == 0 {
		t.Fatalf("kubectl kustomize %s printed no objects", dir)
	}
	return &deployManifests{objs: objs}
}

func deployDecode(b []byte) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
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

func (m *deployManifests) find(kind, namespace, name string) *unstructured.Unstructured {
	for _, o := range m.objs {
		if o.GetKind() == kind && o.GetNamespace() == namespace && o.GetName() == name {
			return o
		}
	}
	return nil
}

func (m *deployManifests) ofKind(kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range m.objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

// yamlOf is the YAML stream of the objects keep selects.
func (m *deployManifests) yamlOf(keep func(*unstructured.Unstructured) bool) []byte {
	var b bytes.Buffer
	for _, o := range m.objs {
		if keep(o) {
			y, _ := yaml.Marshal(o.Object)
			b.WriteString("---\n")
			b.Write(y)
		}
	}
	return b.Bytes()
}

// deployTyped converts a manifest object into its Go type.
func deployTyped[T any](t *testing.T, m *deployManifests, kind, namespace, name string) *T {
	t.Helper()
	u := m.find(kind, namespace, name)
	if u == nil {
		t.Fatalf("deploy/ has no %s %s/%s", kind, namespace, name)
	}
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
		t.Fatalf("%s %s: %v", kind, name, err)
	}
	return out
}

// deployCheckManifests checks what deploy/ holds, without a cluster.
func deployCheckManifests(t *testing.T, m *deployManifests) {
	if m.find("Namespace", "", deployNamespace) == nil {
		t.Errorf("no Namespace %s", deployNamespace)
	}
	for _, o := range m.objs {
		if o.GetNamespace() != "" && o.GetNamespace() != deployNamespace {
			t.Errorf("%s %s is in namespace %s, not %s", o.GetKind(), o.GetName(), o.GetNamespace(), deployNamespace)
		}
	}

	// The CRDs are schemas/crds' (deploy/deploy_test.go checks the copy
	// byte for byte; this checks what kustomize makes of it).
	want, err := crds.All()
	if err != nil {
		t.Fatal(err)
	}
	if got := len(m.ofKind("CustomResourceDefinition")); got != len(want) {
		t.Errorf("%d CustomResourceDefinitions, schemas/crds has %d", got, len(want))
	}
	for _, crd := range want {
		got := deployTyped[apiextensionsv1.CustomResourceDefinition](t, m, "CustomResourceDefinition", "", crd.Name)
		if !equality.Semantic.DeepEqual(got.Spec, crd.Spec) {
			t.Errorf("CustomResourceDefinition %s differs from schemas/crds; run: go test ./deploy -run TestCRDs -update", crd.Name)
		}
	}

	cfg := deployTyped[corev1.ConfigMap](t, m, "ConfigMap", deployNamespace, deployConfigMapName(t, m))
	for _, r := range deployRoles {
		name := "uc-" + r.role
		d := deployTyped[appsv1.Deployment](t, m, "Deployment", deployNamespace, name)
		if d.Spec.Replicas == nil || *d.Spec.Replicas != r.replicas {
			t.Errorf("Deployment %s: replicas %v, want %d", name, d.Spec.Replicas, r.replicas)
		}
		pod := d.Spec.Template.Spec
		if pod.ServiceAccountName != name || m.find("ServiceAccount", deployNamespace, name) == nil {
			t.Errorf("Deployment %s runs as ServiceAccount %q; want its own, %s, in deploy/", name, pod.ServiceAccountName, name)
		}
		deployCheckBinding(t, m, r.role)
		if len(pod.Containers) != 1 {
			t.Fatalf("Deployment %s: %d containers, want 1", name, len(pod.Containers))
		}
		c := pod.Containers[0]
		if c.Image != deployImage {
			t.Errorf("%s: image %s, want %s", name, c.Image, deployImage)
		}
		if len(c.Command) != 0 || len(c.Args) == 0 || c.Args[0] != r.role {
			t.Errorf("%s: command %q args %q; want the image's entrypoint with args [%s ...]", name, c.Command, c.Args, r.role)
		}
		vars := deployEnv(t, m, d.Namespace, name+"-0", pod, c)
		flags := deployFlags(t, r.role)
		for k := range vars {
			if !strings.HasPrefix(k, "UC_") {
				continue
			}
			flag := strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(k, "UC_"), "_", "-"))
			if !flags[flag] {
				t.Errorf("%s sets %s, but uc %s has no flag --%s", name, k, r.role, flag)
			}
		}
		deployCheckPorts(t, name, c, vars)
		if user := natsauth.RoleUser(r.role); vars["UC_NATS_USER"] != user || vars["UC_NATS_PASSWORD"] != deploySecret(t, m, deployNamespace, deployPasswordsSecret(t, m))[natsauth.PasswordVariable(user)] {
			t.Errorf("%s: connects to NATS as %q; want its own user %s, with the password the NATS servers have", name, vars["UC_NATS_USER"], user)
		}
		if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
			t.Errorf("%s: resources %v; want cpu and memory requests and a memory limit", name, c.Resources)
		}
	}

	// NATS: the uc-config URL names the client Service of a 3-node
	// StatefulSet, and the streams are replicated on all three.
	sts := deployTyped[appsv1.StatefulSet](t, m, "StatefulSet", deployNamespace, "nats")
	if sts.Spec.Replicas == nil || *sts.Spec.Replicas != 3 {
		t.Errorf("StatefulSet nats: replicas %v, want 3", sts.Spec.Replicas)
	}
	if got := cfg.Data["UC_STREAM_REPLICAS"]; got != "3" {
		t.Errorf("UC_STREAM_REPLICAS is %q, want 3, the NATS servers", got)
	}
	if len(sts.Spec.VolumeClaimTemplates) != 1 {
		t.Errorf("StatefulSet nats: %d volume claim templates, want 1 for JetStream's files", len(sts.Spec.VolumeClaimTemplates))
	}
	headless := deployTyped[corev1.Service](t, m, "Service", deployNamespace, sts.Spec.ServiceName)
	if headless.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("Service %s of the StatefulSet is not headless", headless.Name)
	}
	u, err := url.Parse(cfg.Data["UC_NATS_URL"])
	if err != nil {
		t.Fatalf("UC_NATS_URL: %v", err)
	}
	client := deployTyped[corev1.Service](t, m, "Service", deployNamespace, u.Hostname())
	if !slices.ContainsFunc(client.Spec.Ports, func(p corev1.ServicePort) bool { return strconv.Itoa(int(p.Port)) == u.Port() }) {
		t.Errorf("Service %s has no port %s (UC_NATS_URL %s)", client.Name, u.Port(), u)
	}
	for k, v := range client.Spec.Selector {
		if sts.Spec.Template.Labels[k] != v {
			t.Errorf("Service %s selects %s=%s, which the NATS pods lack", client.Name, k, v)
		}
	}
	deployCheckNATSConf(t, m, sts)
}

// deployConfigMapName is the name kustomize gave the uc-config ConfigMap
// (with its content hash), found through the watcher's envFrom.
func deployConfigMapName(t *testing.T, m *deployManifests) string {
	d := deployTyped[appsv1.Deployment](t, m, "Deployment", deployNamespace, "uc-watcher")
	for _, c := range d.Spec.Template.Spec.Containers {
		for _, from := range c.EnvFrom {
			if from.ConfigMapRef != nil && strings.HasPrefix(from.ConfigMapRef.Name, "uc-config") {
				return from.ConfigMapRef.Name
			}
		}
	}
	t.Fatal("the watcher takes no uc-config ConfigMap")
	return ""
}

// deployCheckBinding checks that a ClusterRoleBinding binds the role's
// ServiceAccount to an aggregated ClusterRole selecting
// universalcontroller.dev/aggregate-to-<role>, and that deploy/ holds a
// base ClusterRole with that label.
func deployCheckBinding(t *testing.T, m *deployManifests, role string) {
	t.Helper()
	sa, label := "uc-"+role, deployAggregateLabel+role
	var bound []string
	for _, u := range m.ofKind("ClusterRoleBinding") {
		b := deployTyped[rbacv1.ClusterRoleBinding](t, m, "ClusterRoleBinding", "", u.GetName())
		if slices.ContainsFunc(b.Subjects, func(s rbacv1.Subject) bool {
			return s.Kind == "ServiceAccount" && s.Name == sa && s.Namespace == deployNamespace
		}) {
			bound = append(bound, b.RoleRef.Name)
		}
	}
	if len(bound) != 1 {
		t.Errorf("ServiceAccount %s is bound to ClusterRoles %q; want exactly one, aggregated", sa, bound)
		return
	}
	cr := deployTyped[rbacv1.ClusterRole](t, m, "ClusterRole", "", bound[0])
	if cr.AggregationRule == nil || !slices.ContainsFunc(cr.AggregationRule.ClusterRoleSelectors, func(s metav1.LabelSelector) bool {
		return s.MatchLabels[label] == "true"
	}) {
		t.Errorf("ClusterRole %s does not aggregate ClusterRoles labelled %s", cr.Name, label)
	}
	if len(cr.Rules) != 0 {
		t.Errorf("ClusterRole %s is aggregated; its rules belong in ClusterRoles labelled %s", cr.Name, label)
	}
	if !slices.ContainsFunc(m.ofKind("ClusterRole"), func(u *unstructured.Unstructured) bool { return u.GetLabels()[label] == "true" }) {
		t.Errorf("no ClusterRole labelled %s in deploy/", label)
	}
}

// deployCheckPorts checks that the probes ask uc's health address, and
// that the named ports are the addresses uc listens on.
func deployCheckPorts(t *testing.T, name string, c corev1.Container, vars map[string]string) {
	t.Helper()
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	for portName, variable := range map[string]string{"health": "UC_HEALTH_ADDR", "metrics": "UC_METRICS_ADDR"} {
		_, port, err := net.SplitHostPort(vars[variable])
		if err != nil || port != strconv.Itoa(int(ports[portName])) {
			t.Errorf("%s: %s=%q, container port %q is %d; want the same port", name, variable, vars[variable], portName, ports[portName])
		}
	}
	for kind, p := range map[string]*corev1.Probe{"startup": c.StartupProbe, "liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
		if p == nil || p.HTTPGet == nil {
			t.Errorf("%s: no %s probe over HTTP", name, kind)
			continue
		}
		if p.HTTPGet.Port.String() != "health" {
			t.Errorf("%s: %s probe on port %s, want health", name, kind, p.HTTPGet.Port.String())
		}
	}
	if c.ReadinessProbe != nil && c.ReadinessProbe.HTTPGet != nil && c.ReadinessProbe.HTTPGet.Path != "/readyz" {
		t.Errorf("%s: readiness probe on %s, want /readyz", name, c.ReadinessProbe.HTTPGet.Path)
	}
	if c.LivenessProbe != nil && c.LivenessProbe.HTTPGet != nil && c.LivenessProbe.HTTPGet.Path != "/healthz" {
		t.Errorf("%s: liveness probe on %s, want /healthz", name, c.LivenessProbe.HTTPGet.Path)
	}
}

// deployCheckNATSConf checks nats.conf against the StatefulSet: its ports
// are the container's, and its routes name every server through the
// headless Service.
func deployCheckNATSConf(t *testing.T, m *deployManifests, sts *appsv1.StatefulSet) {
	t.Helper()
	conf := deployNATSConf(t, m, sts)
	c := sts.Spec.Template.Spec.Containers[0]
	ports := map[string]int64{}
	for _, p := range c.Ports {
		ports[p.Name] = int64(p.ContainerPort)
	}
	cluster, _ := conf["cluster"].(map[string]any)
	for name, got := range map[string]any{"client": conf["port"], "monitor": conf["http_port"], "cluster": cluster["port"]} {
		if got != ports[name] {
			t.Errorf("nats.conf: the %s port is %v, the container's is %d", name, got, ports[name])
		}
	}
	var want []string
	for i := range *sts.Spec.Replicas {
		want = append(want, fmt.Sprintf("nats://%s-%d.%s:%d", sts.Name, i, sts.Spec.ServiceName, ports["cluster"]))
	}
	var routes []string
	if rs, ok := cluster["routes"].([]any); ok {
		for _, r := range rs {
			routes = append(routes, fmt.Sprint(r))
		}
	}
	if !slices.Equal(routes, want) {
		t.Errorf("nats.conf: routes %q, want %q", routes, want)
	}
	if _, ok := conf["jetstream"].(map[string]any); !ok {
		t.Error("nats.conf does not enable JetStream")
	}
	// Every role has its user, with a password from the Secret.
	account, _ := conf["accounts"].(map[string]any)[natsauth.Account].(map[string]any)
	users := map[string]string{}
	list, _ := account["users"].([]any)
	for _, u := range list {
		u, _ := u.(map[string]any)
		name, _ := u["user"].(string)
		users[name], _ = u["password"].(string)
	}
	for _, r := range deployRoles {
		if pw := users[natsauth.RoleUser(r.role)]; pw == "" {
			t.Errorf("nats.conf: no user %s with a password (users: %v)", natsauth.RoleUser(r.role), slices.Sorted(maps.Keys(users)))
		}
	}
}

// deployNATSConf parses the nats.conf the StatefulSet mounts, with the
// files it includes and the environment the servers get.
func deployNATSConf(t *testing.T, m *deployManifests, sts *appsv1.StatefulSet) map[string]any {
	t.Helper()
	dir := t.TempDir()
	pod := sts.Spec.Template.Spec
	for k, v := range deployEnv(t, m, sts.Namespace, sts.Name+"-0", pod, pod.Containers[0]) {
		t.Setenv(k, v)
	}
	found := false
	for _, v := range pod.Volumes {
		if v.ConfigMap == nil {
			continue
		}
		cm := deployTyped[corev1.ConfigMap](t, m, "ConfigMap", sts.Namespace, v.ConfigMap.Name)
		_, ok := cm.Data["nats.conf"]
		found = found || ok
		for file, text := range cm.Data {
			if err := os.WriteFile(filepath.Join(dir, file), []byte(text), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	if !found {
		t.Fatal("the NATS StatefulSet mounts no ConfigMap with nats.conf")
	}
	conf, err := natsconf.ParseFile(filepath.Join(dir, "nats.conf"))
	if err != nil {
		t.Fatalf("nats.conf: %v", err)
	}
	return conf
}

// deployDryRun has the API server validate every object of deploy/ and
// deploy/examples/, with strict field validation, without persisting them.
func deployDryRun(t *testing.T, m *deployManifests) {
	// Objects in uc-system cannot be dry-run before the namespace exists.
	if _, err := deployKubectl(t, m.yamlOf(func(u *unstructured.Unstructured) bool { return u.GetKind() == "Namespace" }), "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	out, err := deployKubectl(t, nil, "apply", "--dry-run=server", "--validate=strict", "-k", "deploy")
	if err != nil {
		t.Fatalf("server-side dry run of deploy/: %v", err)
	}
	if n := strings.Count(out, "(server dry run)"); n != len(m.objs) {
		t.Errorf("the dry run reported on %d objects, deploy/ has %d:\n%s", n, len(m.objs), out)
	}
	t.Logf("kubectl apply --dry-run=server -k deploy/:\n%s", out)
	if out, err = deployKubectl(t, nil, "apply", "--dry-run=server", "--validate=strict", "-f", "deploy/examples"); err != nil {
		t.Fatalf("server-side dry run of deploy/examples/: %v", err)
	}
	t.Logf("kubectl apply --dry-run=server -f deploy/examples/:\n%s", out)

	// The dry run validates: a field the API does not know fails it.
	bad := m.find("Deployment", deployNamespace, "uc-applier").DeepCopy()
	containers, _, _ := unstructured.NestedSlice(bad.Object, "spec", "template", "spec", "containers")
	containers[0].(map[string]any)["livenesProbe"] = map[string]any{}
	_ = unstructured.SetNestedSlice(bad.Object, containers, "spec", "template", "spec", "containers")
	y, _ := yaml.Marshal(bad.Object)
	if _, err := deployKubectl(t, y, "apply", "--dry-run=server", "--validate=strict", "-f", "-"); err == nil || !strings.Contains(err.Error(), "livenesProbe") {
		t.Errorf("a misspelt field passed the dry run (err %v)", err)
	}
}

// deployAccess is one question to the API server's authorizer: may the
// role's ServiceAccount do verb on group/resource[/subresource], in
// namespace ("" is every namespace), on the object name ("" is any)?
type deployAccess struct {
	role, verb, group, resource, sub, namespace, name string
	want                                              bool
}

func (a deployAccess) String() string {
	r := a.resource
	if a.group != "" {
		r += "." + a.group
	}
	if a.sub != "" {
		r += "/" + a.sub
	}
	if a.name != "" {
		r += " " + a.name
	}
	where := "in every namespace"
	if a.namespace != "" {
		where = "in " + a.namespace
	}
	return fmt.Sprintf("uc-%s %s %s %s", a.role, a.verb, r, where)
}

// deployCan asks the API server whether a is allowed.
func deployCan(ctx context.Context, a deployAccess) (bool, error) {
	sar, err := env.kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User:   "system:serviceaccount:" + deployNamespace + ":uc-" + a.role,
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + deployNamespace, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb: a.verb, Group: a.group, Resource: a.resource, Subresource: a.sub, Namespace: a.namespace, Name: a.name,
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return false, err
	}
	return sar.Status.Allowed, nil
}

// deployAwaitAccess waits until every access is as wanted: aggregation
// takes a moment after a ClusterRole comes or goes.
func deployAwaitAccess(t *testing.T, timeout time.Duration, accesses ...deployAccess) {
	t.Helper()
	eventually(t, timeout, func() error {
		for _, a := range accesses {
			ok, err := deployCan(t.Context(), a)
			if err != nil {
				return err
			}
			if ok != a.want {
				return fmt.Errorf("%s: allowed=%t, want %t", a, ok, a.want)
			}
		}
		return nil
	})
}

// deployCheckAccess fails t for every access that is not as wanted.
func deployCheckAccess(t *testing.T, accesses []deployAccess) {
	t.Helper()
	for _, a := range accesses {
		ok, err := deployCan(t.Context(), a)
		if err != nil {
			t.Fatal(err)
		}
		if ok != a.want {
			t.Errorf("%s: allowed=%t, want %t", a, ok, a.want)
		}
	}
}

// deployLeastPrivilege asks the API server what each role's ServiceAccount
// may do: with deploy/ alone, and with the Foo example's RBAC added.
func deployLeastPrivilege(t *testing.T) {
	const (
		apps, uc, sample, coord = "apps", "universalcontroller.dev", "samplecontroller.k8s.io", "coordination.k8s.io"
		ns                      = "some-namespace"
	)
	// deploy/ alone: each role reads UniversalControllers and
	// UniversalDecorators, and nothing of any controller's kinds.
	base := []deployAccess{
		{role: "watcher", verb: "watch", group: uc, resource: "universalcontrollers", want: true},
		{role: "applier", verb: "list", group: uc, resource: "universalcontrollers", want: true},
		{role: "dispatcher", verb: "watch", group: uc, resource: "universalcontrollers", want: true},
		{role: "watcher", verb: "watch", group: uc, resource: "universaldecorators", want: true},
		{role: "applier", verb: "list", group: uc, resource: "universaldecorators", want: true},
		{role: "dispatcher", verb: "watch", group: uc, resource: "universaldecorators", want: true},
		{role: "applier", verb: "create", resource: "events", namespace: ns, want: true},
		// The applier watches what could refuse a write, so that it
		// dry-runs a reply only when something could.
		{role: "applier", verb: "watch", group: "admissionregistration.k8s.io", resource: "validatingadmissionpolicybindings", want: true},
		{role: "applier", verb: "list", resource: "resourcequotas", want: true},
		{role: "applier", verb: "list", resource: "namespaces", want: true},
		{role: "applier", verb: "create", group: "authorization.k8s.io", resource: "selfsubjectaccessreviews", want: true},
		{role: "dispatcher", verb: "patch", group: uc, resource: "universalcontrollers", sub: "status", want: true},
		{role: "dispatcher", verb: "patch", group: uc, resource: "universaldecorators", sub: "status", want: true},
		{role: "applier", verb: "patch", group: uc, resource: "universaldecorators"},
		{role: "watcher", verb: "patch", group: uc, resource: "universaldecorators", sub: "status"},
	}
	deployAwaitAccess(t, time.Minute, base...)
	deployCheckAccess(t, []deployAccess{
		{role: "applier", verb: "patch", group: apps, resource: "deployments", namespace: ns},
		{role: "applier", verb: "list", group: apps, resource: "deployments"},
		{role: "watcher", verb: "list", group: sample, resource: "foos"},
		{role: "dispatcher", verb: "list", group: apps, resource: "deployments"},
	})

	t.Cleanup(func() {
		_, _ = deployKubectl(t, nil, "delete", "--ignore-not-found", "-f", "deploy/examples/foo-controller-rbac.yaml")
	})
	if _, err := deployKubectl(t, nil, "apply", "-f", "deploy/examples/foo-controller-rbac.yaml"); err != nil {
		t.Fatal(err)
	}
	deployAwaitAccess(t, time.Minute, deployAccess{role: "applier", verb: "patch", group: apps, resource: "deployments", namespace: ns, want: true})

	deployCheckAccess(t, append(base, []deployAccess{
		// The watcher reads: UniversalControllers, the Foo controller's
		// kinds, namespaces; and holds its Lease, in uc-system only.
		{role: "watcher", verb: "list", group: sample, resource: "foos", want: true},
		{role: "watcher", verb: "watch", group: apps, resource: "deployments", want: true},
		{role: "watcher", verb: "list", resource: "namespaces", want: true},
		{role: "watcher", verb: "create", group: coord, resource: "leases", namespace: deployNamespace, want: true},
		{role: "watcher", verb: "update", group: coord, resource: "leases", namespace: deployNamespace, name: "uc-watcher", want: true},
		{role: "watcher", verb: "update", group: coord, resource: "leases", namespace: deployNamespace, name: "someone-elses"},
		{role: "watcher", verb: "update", group: coord, resource: "leases", namespace: "kube-system", name: "uc-watcher"},
		// ... and writes nothing.
		{role: "watcher", verb: "create", group: apps, resource: "deployments", namespace: ns},
		{role: "watcher", verb: "patch", group: apps, resource: "deployments", namespace: ns},
		{role: "watcher", verb: "delete", group: apps, resource: "deployments", namespace: ns},
		{role: "watcher", verb: "patch", group: sample, resource: "foos", sub: "status", namespace: ns},
		{role: "watcher", verb: "patch", group: sample, resource: "foos", namespace: ns},
		{role: "watcher", verb: "create", resource: "events", namespace: ns},
		{role: "watcher", verb: "patch", group: uc, resource: "universalcontrollers", sub: "status"},
		{role: "watcher", verb: "create", group: uc, resource: "universalcontrollers"},
		{role: "watcher", verb: "get", resource: "secrets", namespace: ns},
		{role: "watcher", verb: "list", resource: "secrets"},
		{role: "watcher", verb: "list", resource: "configmaps"},
		{role: "watcher", verb: "create", group: "rbac.authorization.k8s.io", resource: "rolebindings", namespace: ns},

		// The applier writes the declared children, the parent's status
		// and finalizers, and Events.
		{role: "applier", verb: "create", group: apps, resource: "deployments", namespace: ns, want: true},
		{role: "applier", verb: "patch", group: apps, resource: "deployments", namespace: ns, want: true},
		{role: "applier", verb: "delete", group: apps, resource: "deployments", namespace: ns, want: true},
		{role: "applier", verb: "list", group: apps, resource: "deployments", want: true},
		{role: "applier", verb: "get", group: sample, resource: "foos", namespace: ns, want: true},
		{role: "applier", verb: "patch", group: sample, resource: "foos", sub: "status", namespace: ns, want: true},
		{role: "applier", verb: "patch", group: sample, resource: "foos", namespace: ns, want: true},
		{role: "applier", verb: "update", group: sample, resource: "foos", sub: "finalizers", namespace: ns, want: true},
		// ... and nothing else: not the parent's life, no undeclared kind,
		// no secrets, not uc's own objects, no RBAC.
		{role: "applier", verb: "create", group: sample, resource: "foos", namespace: ns},
		{role: "applier", verb: "delete", group: sample, resource: "foos", namespace: ns},
		{role: "applier", verb: "create", resource: "configmaps", namespace: ns},
		{role: "applier", verb: "create", resource: "pods", namespace: ns},
		{role: "applier", verb: "patch", group: apps, resource: "statefulsets", namespace: ns},
		{role: "applier", verb: "get", resource: "secrets", namespace: ns},
		{role: "applier", verb: "list", resource: "secrets"},
		{role: "applier", verb: "create", resource: "secrets", namespace: ns},
		{role: "applier", verb: "patch", group: uc, resource: "universalcontrollers"},
		{role: "applier", verb: "patch", group: uc, resource: "universalcontrollers", sub: "status"},
		{role: "applier", verb: "update", group: coord, resource: "leases", namespace: deployNamespace, name: "uc-watcher"},
		{role: "applier", verb: "create", group: "rbac.authorization.k8s.io", resource: "clusterrolebindings"},
		{role: "applier", verb: "impersonate", resource: "serviceaccounts", namespace: deployNamespace},

		// The dispatcher reports on UniversalControllers, reads webhook
		// credentials by name, watches Services for destinations.
		{role: "dispatcher", verb: "get", resource: "secrets", namespace: ns, want: true},
		{role: "dispatcher", verb: "get", resource: "configmaps", namespace: ns, want: true},
		{role: "dispatcher", verb: "watch", resource: "services", want: true},
		{role: "dispatcher", verb: "create", resource: "events", namespace: "default", want: true},
		// ... and writes nothing else, and cannot enumerate credentials.
		{role: "dispatcher", verb: "list", resource: "secrets"},
		{role: "dispatcher", verb: "watch", resource: "secrets", namespace: ns},
		{role: "dispatcher", verb: "create", resource: "secrets", namespace: ns},
		{role: "dispatcher", verb: "update", group: uc, resource: "universalcontrollers"},
		{role: "dispatcher", verb: "delete", group: uc, resource: "universalcontrollers"},
		{role: "dispatcher", verb: "create", group: apps, resource: "deployments", namespace: ns},
		{role: "dispatcher", verb: "patch", group: sample, resource: "foos", sub: "status", namespace: ns},
		{role: "dispatcher", verb: "patch", group: sample, resource: "foos", namespace: ns},
		{role: "dispatcher", verb: "update", group: coord, resource: "leases", namespace: deployNamespace, name: "uc-watcher"},
		{role: "dispatcher", verb: "bind", group: "rbac.authorization.k8s.io", resource: "clusterroles"},
		{role: "dispatcher", verb: "escalate", group: "rbac.authorization.k8s.io", resource: "clusterroles"},
	}...))

	// The example follows the documented pattern exactly.
	deployCheckPattern(t, "examples/foo/controller.yaml", "deploy/examples/foo-controller-rbac.yaml")
}

// deployControllerRBAC is the RBAC deploy/README.md tells a controller's
// author to add: a read role aggregated into every uc role (parent and
// children: get, list, watch) and an apply role aggregated into the
// applier (children: create, update, patch, delete; parent: status update
// and patch, patch for the finalizer, finalizers update for
// blockOwnerDeletion). withApply false gives the read role only.
func deployControllerRBAC(ctl *v1alpha1.UniversalController, withApply bool) []rbacv1.ClusterRole {
	gr := func(r v1alpha1.ResourceRule) (string, string) {
		gv, _ := schema.ParseGroupVersion(r.APIVersion)
		return gv.Group, r.Resource
	}
	pg, pr := gr(ctl.Spec.ParentResource.ResourceRule)
	read := rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "uc-e2e-deploy-" + ctl.Name + "-read", Labels: map[string]string{
		deployAggregateLabel + "watcher": "true", deployAggregateLabel + "applier": "true", deployAggregateLabel + "dispatcher": "true"}}}
	apply := rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "uc-e2e-deploy-" + ctl.Name + "-apply", Labels: map[string]string{
		deployAggregateLabel + "applier": "true"}}}
	rule := func(group, resource string, verbs ...string) rbacv1.PolicyRule {
		return rbacv1.PolicyRule{APIGroups: []string{group}, Resources: []string{resource}, Verbs: verbs}
	}
	read.Rules = append(read.Rules, rule(pg, pr, "get", "list", "watch"))
	for _, c := range ctl.Spec.ChildResources {
		g, r := gr(c.ResourceRule)
		read.Rules = append(read.Rules, rule(g, r, "get", "list", "watch"))
		apply.Rules = append(apply.Rules, rule(g, r, "create", "update", "patch", "delete"))
	}
	apply.Rules = append(apply.Rules, rule(pg, pr+"/status", "update", "patch"), rule(pg, pr, "patch"), rule(pg, pr+"/finalizers", "update"))
	if !withApply {
		return []rbacv1.ClusterRole{read}
	}
	return []rbacv1.ClusterRole{read, apply}
}

// deployRuleSet flattens rules into "group resource verb" entries.
func deployRuleSet(rules []rbacv1.PolicyRule) []string {
	var out []string
	for _, r := range rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					out = append(out, g+" "+res+" "+v)
				}
			}
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// deployCheckPattern checks that the ClusterRoles of rbacFile grant, per
// aggregation label, exactly what deployControllerRBAC gives the
// UniversalController of controllerFile.
func deployCheckPattern(t *testing.T, controllerFile, rbacFile string) {
	t.Helper()
	ctl := deployReadUC(t, controllerFile)
	b, err := os.ReadFile(filepath.Join(env.root, rbacFile))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := deployDecode(b)
	if err != nil {
		t.Fatal(err)
	}
	byRole := func(roles []rbacv1.ClusterRole) map[string][]string {
		out := map[string][]rbacv1.PolicyRule{}
		for _, cr := range roles {
			for k, v := range cr.Labels {
				if strings.HasPrefix(k, deployAggregateLabel) && v == "true" {
					out[k] = append(out[k], cr.Rules...)
				}
			}
		}
		sets := map[string][]string{}
		for k, rules := range out {
			sets[k] = deployRuleSet(rules)
		}
		return sets
	}
	var file []rbacv1.ClusterRole
	for _, o := range objs {
		var cr rbacv1.ClusterRole
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &cr); err != nil {
			t.Fatal(err)
		}
		file = append(file, cr)
	}
	got, want := byRole(file), byRole(deployControllerRBAC(ctl, true))
	if !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("%s grants, per aggregation label,\n%v\nbut the pattern for %s is\n%v", rbacFile, got, controllerFile, want)
	}
}

func deployReadUC(t *testing.T, path string) *v1alpha1.UniversalController {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(env.root, path))
	if err != nil {
		t.Fatal(err)
	}
	var ctl v1alpha1.UniversalController
	if err := yaml.Unmarshal(b, &ctl); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return &ctl
}

// deployRoleProcesses runs every role of deploy/ as processes, with the
// replicas, arguments and environment of its Deployment and the rights of
// its ServiceAccount, on NATS servers run from the StatefulSet's arguments
// and nats.conf; only addresses and paths are the test bed's. Then a
// controller works end to end: a Gadget gets its Deployment, its status
// and uc's finalizer, and is finalized when deleted.
func deployRoleProcesses(t *testing.T, m *deployManifests) {
	ctx := t.Context()
	dir := t.TempDir()

	// The Gadget controller's kinds and RBAC, by the documented pattern.
	if err := applyFile(ctx, filepath.Join(env.root, "test/e2e/testdata/deploy-gadget-crd.yaml")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, func() error {
		_, err := env.dyn.Resource(deployGadgetGVR).List(ctx, metav1.ListOptions{Limit: 1})
		return err
	})
	deployCheckPattern(t, "test/e2e/testdata/deploy-gadget-controller.yaml", "test/e2e/testdata/deploy-gadget-rbac.yaml")
	t.Cleanup(func() {
		_, _ = deployKubectl(t, nil, "delete", "--ignore-not-found", "-f", "test/e2e/testdata/deploy-gadget-rbac.yaml")
	})
	if _, err := deployKubectl(t, nil, "apply", "-f", "test/e2e/testdata/deploy-gadget-rbac.yaml"); err != nil {
		t.Fatal(err)
	}
	// Every role caches the kinds of every registered controller, and
	// waits up to a minute for caches it may not fill: as an administrator
	// would, give the roles read access to the other controllers the e2e
	// suite has registered. (Never write access: they get no replies.)
	others := deployReadOthers(t)
	deployAwaitAccess(t, time.Minute, append(others,
		deployAccess{role: "applier", verb: "patch", group: deployGadgetGVR.Group, resource: "gadgets", sub: "status", namespace: "x", want: true},
		deployAccess{role: "watcher", verb: "list", group: deployGadgetGVR.Group, resource: "gadgets", want: true},
		deployAccess{role: "dispatcher", verb: "list", group: deployGadgetGVR.Group, resource: "gadgets", want: true},
	)...)

	const hookPassword = "gadget-hook-password"
	natsURL := deployStartNATS(t, m, filepath.Join(dir, "nats"), map[string]string{deployGadgetUC: hookPassword})

	var procs []*deployProcess
	for _, r := range deployRoles {
		d := deployTyped[appsv1.Deployment](t, m, "Deployment", deployNamespace, "uc-"+r.role)
		kubeconfig := deployServiceAccountKubeconfig(t, d.Namespace, d.Spec.Template.Spec.ServiceAccountName, filepath.Join(dir, d.Name+".kubeconfig"))
		flags := deployFlags(t, r.role)
		for i := range *d.Spec.Replicas {
			procs = append(procs, deployStartRole(t, m, d, i, flags, dir, map[string]string{
				"UC_NATS_URL":   natsURL,
				"UC_KUBECONFIG": kubeconfig,
			}))
		}
	}
	running := func() error {
		for _, p := range procs {
			if err := p.check(t); err != nil {
				return err
			}
		}
		return nil
	}
	// Every probe of every process answers 200.
	eventually(t, time.Minute, func() error {
		if err := running(); err != nil {
			return err
		}
		for _, p := range procs {
			for _, u := range p.probes {
				if err := deployGet(ctx, u); err != nil {
					return fmt.Errorf("%s: %w", p.name, err)
				}
			}
		}
		return nil
	})
	// One watcher leads, holding the Lease in uc-system.
	eventually(t, 30*time.Second, func() error {
		if err := running(); err != nil {
			return err
		}
		lease, err := env.kube.CoordinationV1().Leases(deployNamespace).Get(ctx, "uc-watcher", metav1.GetOptions{})
		if err != nil {
			return err
		}
		var leaders []string
		for _, p := range procs {
			if p.logHas("leading: this watcher is active") {
				leaders = append(leaders, p.name)
			}
		}
		if len(leaders) != 1 || lease.Spec.HolderIdentity == nil {
			return fmt.Errorf("leading watchers %q, lease holder %v", leaders, lease.Spec.HolderIdentity)
		}
		return nil
	})

	// A hook worker on the manifests' NATS: the Foo example's sync hook, and
	// a finalize hook that lets go at once.
	hookUser := bus.Connection{URL: natsURL, User: natsauth.HookUser(deployGadgetUC), Password: hookPassword,
		InboxPrefix: bus.HookInbox(deployGadgetUC)}
	js := jetStreamAs(t, hookUser, "gadget-worker")
	var finalized sync.Map
	wctx, stopWorkers := context.WithCancel(context.WithoutCancel(ctx))
	var workers sync.WaitGroup
	t.Cleanup(func() { stopWorkers(); workers.Wait() })
	for _, h := range []hook.Handler{
		hook.Sync(foo.Sync),
		hook.Finalize(func(_ context.Context, req *hook.SyncRequest) (*hook.SyncResponse, error) {
			finalized.Store(req.Parent.GetName(), true)
			return &hook.SyncResponse{Finalized: true}, nil
		}),
	} {
		workers.Add(1)
		go func() { // restarted on error, as a worker's Deployment would be
			defer workers.Done()
			for {
				err := hook.Serve(wctx, js, deployGadgetUC, h)
				if wctx.Err() != nil {
					return
				}
				t.Logf("%s worker: %v; serving again", h.Hook(), err)
				select {
				case <-wctx.Done():
					return
				case <-time.After(time.Second):
				}
			}
		}()
	}
	t.Cleanup(func() {
		_ = env.dyn.Resource(v1alpha1.Resource).Delete(context.Background(), deployGadgetUC, metav1.DeleteOptions{})
	})
	if err := applyFile(ctx, filepath.Join(env.root, "test/e2e/testdata/deploy-gadget-controller.yaml")); err != nil {
		t.Fatal(err)
	}

	ns := namespace(t)
	gadget := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "deploy.e2e.universalcontroller.dev/v1", "kind": "Gadget",
		"metadata": map[string]any{"name": "g1", "namespace": ns},
		"spec":     map[string]any{"deploymentName": "g1-web", "replicas": int64(2)},
	}}
	created, err := env.dyn.Resource(deployGadgetGVR).Namespace(ns).Create(ctx, gadget, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // never leave a Gadget stuck on uc's finalizer
		g, err := env.dyn.Resource(deployGadgetGVR).Namespace(ns).Get(context.Background(), "g1", metav1.GetOptions{})
		if err == nil && len(g.GetFinalizers()) > 0 {
			g.SetFinalizers(nil)
			_, _ = env.dyn.Resource(deployGadgetGVR).Namespace(ns).Update(context.Background(), g, metav1.UpdateOptions{})
		}
	})
	finalizer := "universalcontroller.dev/" + deployGadgetUC
	eventually(t, 2*time.Minute, func() error {
		if err := running(); err != nil {
			return err
		}
		d, err := env.kube.AppsV1().Deployments(ns).Get(ctx, "g1-web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if ref := metav1.GetControllerOf(d); ref == nil || ref.UID != created.GetUID() {
			return fmt.Errorf("deployment g1-web is controlled by %v, not the Gadget", ref)
		}
		g, err := env.dyn.Resource(deployGadgetGVR).Namespace(ns).Get(ctx, "g1", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !slices.Contains(g.GetFinalizers(), finalizer) {
			return fmt.Errorf("gadget finalizers %q lack %s", g.GetFinalizers(), finalizer)
		}
		if n, _, _ := unstructured.NestedInt64(g.Object, "status", "availableReplicas"); n != 2 {
			return fmt.Errorf("gadget status.availableReplicas %d, want 2 (deployment: %d available)", n, d.Status.AvailableReplicas)
		}
		return nil
	})

	if err := env.dyn.Resource(deployGadgetGVR).Namespace(ns).Delete(ctx, "g1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// An applier that restarted takes its partitions back within ~30 s.
	eventually(t, 2*time.Minute, func() error {
		if err := running(); err != nil {
			return err
		}
		_, err := env.dyn.Resource(deployGadgetGVR).Namespace(ns).Get(ctx, "g1", metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("gadget g1 not gone yet (%v)", err)
		}
		return nil
	})
	if _, ok := finalized.Load("g1"); !ok {
		t.Error("gadget g1 went away without its finalize hook")
	}

	// Nothing a role did on the Gadget controller's kinds, nor on NATS, was
	// refused.
	for _, p := range procs {
		if p.restarts > 0 {
			t.Logf("%s was restarted %d times", p.name, p.restarts)
		}
		for _, line := range p.logLines() {
			l := strings.ToLower(line)
			if strings.Contains(l, "forbidden") && (strings.Contains(l, "gadget") || strings.Contains(l, "deployments")) {
				t.Errorf("%s: %s", p.name, line)
			}
			if strings.Contains(line, "NATS refused") { // its NATS user lacks a permission
				t.Errorf("%s: %s", p.name, line)
			}
		}
	}
}

// deployReadOthers gives the roles read access, by the documented pattern,
// to every other registered controller's kinds, until the test ends, and
// returns accesses that show it took effect.
func deployReadOthers(t *testing.T) []deployAccess {
	t.Helper()
	list, err := env.dyn.Resource(v1alpha1.Resource).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var objs []any
	var accesses []deployAccess
	for _, u := range list.Items {
		if u.GetName() == deployGadgetUC || u.GetDeletionTimestamp() != nil {
			continue
		}
		var ctl v1alpha1.UniversalController
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &ctl); err != nil {
			t.Fatal(err)
		}
		for _, cr := range deployControllerRBAC(&ctl, false) {
			cr.TypeMeta = metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"}
			objs = append(objs, cr)
			r := cr.Rules[0]
			accesses = append(accesses, deployAccess{role: "dispatcher", verb: "list", group: r.APIGroups[0], resource: r.Resources[0], want: true})
		}
	}
	if len(objs) == 0 {
		return nil
	}
	y, err := yaml.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": objs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = deployKubectl(t, y, "delete", "--ignore-not-found", "-f", "-") })
	if _, err := deployKubectl(t, y, "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	t.Logf("read access for the %d other registered controllers", len(accesses))
	return accesses
}

// deployProcess is a uc role (or a NATS server) run as the manifests run
// it, restarted like the kubelet restarts a container (restartPolicy
// Always) when it exits in a way deployRestartable accepts.
type deployProcess struct {
	name, log, bin string
	args           []string
	vars           map[string]string
	probes         []string // URLs of its probes, on the test bed's addresses
	proc           *testbed.Process
	logOffset      int64 // where the current run's log starts
	restarts       int
}

// deployMaxRestarts bounds the tolerated restarts of one process.
const deployMaxRestarts = 10

// deployRestartable tells the exits of a uc process that the kubelet's
// restart recovers from, given the log of the run that ended: a watcher
// that lost its Lease exits by design, for a standby to lead. Any other
// exit fails the test.
func deployRestartable(run string) bool {
	return strings.Contains(run, "lost the watcher lease")
}

func (p *deployProcess) logLines() []string {
	b, _ := os.ReadFile(p.log)
	return strings.Split(string(b), "\n")
}

func (p *deployProcess) logHas(s string) bool {
	b, _ := os.ReadFile(p.log)
	return bytes.Contains(b, []byte(s))
}

// start starts bin with exactly args and vars as its environment (env -i:
// nothing of the test's environment), appending to its log.
func (p *deployProcess) start() error {
	envBin, err := exec.LookPath("env")
	if err != nil {
		return err
	}
	if st, err := os.Stat(p.log); err == nil {
		p.logOffset = st.Size()
	}
	p.proc, err = testbed.StartProcess(p.name, envBin, p.log, p.command()...)
	return err
}

func (p *deployProcess) command() []string {
	cmd := []string{"-i"}
	for _, k := range slices.Sorted(maps.Keys(p.vars)) {
		cmd = append(cmd, k+"="+p.vars[k])
	}
	return append(append(cmd, p.bin), p.args...)
}

// check returns nil while the process runs, and restarts it if it exited
// in a way the kubelet's restart recovers from; otherwise, or after too
// many restarts, it returns a backoffStop.
func (p *deployProcess) check(t *testing.T) error {
	exit := p.proc.Exited()
	if exit == nil {
		return nil
	}
	b, _ := os.ReadFile(p.log)
	run := string(b[min(int(p.logOffset), len(b)):])
	if !deployRestartable(run) || p.restarts >= deployMaxRestarts {
		return backoffStop{fmt.Errorf("%w after %d restarts:\n%s", exit, p.restarts, run)}
	}
	p.restarts++
	lines := strings.Split(strings.TrimSpace(run), "\n")
	t.Logf("%s exited (%s); restarting it as the kubelet would (restart %d)", p.name, lines[len(lines)-1], p.restarts)
	if err := p.start(); err != nil {
		return backoffStop{err}
	}
	return errors.New(p.name + " restarted")
}

// deployStart starts a process, stopped at the end of t.
func deployStart(t *testing.T, name, dir, bin string, args []string, vars map[string]string) *deployProcess {
	t.Helper()
	p := &deployProcess{name: name, log: filepath.Join(dir, name+".log"), bin: bin, args: args, vars: vars}
	if err := p.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.proc.Stop(10 * time.Second)
		if t.Failed() {
			lines := p.logLines()
			t.Logf("--- %s: env %s\n--- last lines of %s ---\n%s", name, strings.Join(p.command(), " "), p.log,
				strings.Join(lines[max(0, len(lines)-60):], "\n"))
		}
	})
	return p
}

// deployStartRole starts replica i of a uc Deployment: the container's
// args, and its environment with the addresses in set replaced and the
// health and metrics addresses moved to free loopback ports.
func deployStartRole(t *testing.T, m *deployManifests, d *appsv1.Deployment, i int32, flags map[string]bool, dir string, set map[string]string) *deployProcess {
	t.Helper()
	pod := d.Spec.Template.Spec
	c := pod.Containers[0]
	name := fmt.Sprintf("%s-%d", d.Name, i)
	vars := deployEnv(t, m, d.Namespace, name, pod, c)
	maps.Copy(vars, set)
	for _, variable := range []string{"UC_HEALTH_ADDR", "UC_METRICS_ADDR"} {
		if _, ok := vars[variable]; !ok {
			continue
		}
		port, err := testbed.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		vars[variable] = fmt.Sprintf("127.0.0.1:%d", port)
	}
	var probes []string
	for _, p := range []*corev1.Probe{c.StartupProbe, c.LivenessProbe, c.ReadinessProbe} {
		if p != nil && p.HTTPGet != nil {
			probes = append(probes, "http://"+vars["UC_HEALTH_ADDR"]+p.HTTPGet.Path)
		}
	}
	if flags["metrics-addr"] {
		probes = append(probes, "http://"+vars["UC_METRICS_ADDR"]+"/metrics")
	}
	args := deployExpand(c.Args, vars)
	p := deployStart(t, name, dir, env.uc.bin, args, vars)
	p.probes = probes
	return p
}

// deployEnv is a container's environment as the kubelet would set it for
// the pod podName in namespace: envFrom ConfigMaps of the manifests, then
// env, with $(VAR) references and the downward API resolved.
func deployEnv(t *testing.T, m *deployManifests, namespace, podName string, pod corev1.PodSpec, c corev1.Container) map[string]string {
	t.Helper()
	vars := map[string]string{}
	for _, from := range c.EnvFrom {
		var data map[string]string
		switch {
		case from.ConfigMapRef != nil:
			data = deployTyped[corev1.ConfigMap](t, m, "ConfigMap", namespace, from.ConfigMapRef.Name).Data
		case from.SecretRef != nil:
			data = deploySecret(t, m, namespace, from.SecretRef.Name)
		default:
			t.Fatalf("%s: envFrom other than a ConfigMap or a Secret", podName)
		}
		for k, v := range data {
			vars[from.Prefix+k] = v
		}
	}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			vars[e.Name] = deployExpand([]string{e.Value}, vars)[0]
		case e.ValueFrom.SecretKeyRef != nil:
			ref := e.ValueFrom.SecretKeyRef
			v, ok := deploySecret(t, m, namespace, ref.Name)[ref.Key]
			if !ok {
				t.Fatalf("%s: env %s: Secret %s has no key %s", podName, e.Name, ref.Name, ref.Key)
			}
			vars[e.Name] = v
		case e.ValueFrom.FieldRef != nil:
			v, ok := map[string]string{
				"metadata.name":           podName,
				"metadata.namespace":      namespace,
				"spec.serviceAccountName": pod.ServiceAccountName,
				"spec.nodeName":           "node",
				"status.podIP":            "127.0.0.1",
				"status.hostIP":           "127.0.0.1",
			}[e.ValueFrom.FieldRef.FieldPath]
			if !ok {
				t.Fatalf("%s: env %s: field %s is not simulated", podName, e.Name, e.ValueFrom.FieldRef.FieldPath)
			}
			vars[e.Name] = v
		default:
			t.Fatalf("%s: env %s: only values, fieldRefs and secretKeyRefs are simulated", podName, e.Name)
		}
	}
	return vars
}

// deployPasswordsSecret is the name kustomize gave the Secret of the NATS
// users' passwords, uc-nats-passwords.
func deployPasswordsSecret(t *testing.T, m *deployManifests) string {
	t.Helper()
	for _, o := range m.ofKind("Secret") {
		if strings.HasPrefix(o.GetName(), "uc-nats-passwords") {
			return o.GetName()
		}
	}
	t.Fatal("deploy/ has no Secret uc-nats-passwords")
	return ""
}

// deploySecret is the data of a Secret of the manifests.
func deploySecret(t *testing.T, m *deployManifests, namespace, name string) map[string]string {
	t.Helper()
	sec := deployTyped[corev1.Secret](t, m, "Secret", namespace, name)
	data := map[string]string{}
	for k, v := range sec.Data {
		data[k] = string(v)
	}
	maps.Copy(data, sec.StringData)
	return data
}

var deployVarRef = regexp.MustCompile(`\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// deployExpand expands $(VAR) as the kubelet does in args and env values:
// a defined variable is replaced, $$ is a $, anything else stays.
func deployExpand(in []string, env map[string]string) []string {
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = deployVarRef.ReplaceAllStringFunc(s, func(ref string) string {
			if ref == "$$" {
				return "$"
			}
			if v, ok := env[ref[2:len(ref)-1]]; ok {
				return v
			}
			return ref
		})
	}
	return out
}

// deployStartNATS runs the StatefulSet's NATS servers: its command, args
// and environment, its nats.conf, each volume a directory, and only the
// addresses replaced: loopback, free ports, routes between them. As an
// administrator's overlay would, it adds the hook users of the controllers
// of hookPasswords: auth.conf made again by `uc nats-config`, and their
// passwords. It waits until every probe of every server answers, and
// returns the client URL.
func deployStartNATS(t *testing.T, m *deployManifests, dir string, hookPasswords map[string]string) string {
	t.Helper()
	authConf, err := exec.CommandContext(t.Context(), env.uc.bin, "nats-config",
		"--controllers", strings.Join(slices.Sorted(maps.Keys(hookPasswords)), ",")).Output()
	if err != nil {
		t.Fatalf("uc nats-config: %v", err)
	}
	sts := deployTyped[appsv1.StatefulSet](t, m, "StatefulSet", deployNamespace, "nats")
	pod := sts.Spec.Template.Spec
	c := pod.Containers[0]
	if len(c.Command) != 1 || c.Command[0] != "nats-server" {
		t.Fatalf("the NATS container runs %q, not nats-server", c.Command)
	}
	n := int(*sts.Spec.Replicas)
	type ports struct{ client, cluster, monitor int }
	var ps []ports
	var routes, clients []string
	for range n {
		var p [3]int
		for j := range p {
			var err error
			if p[j], err = testbed.FreePort(); err != nil {
				t.Fatal(err)
			}
		}
		ps = append(ps, ports{p[0], p[1], p[2]})
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", p[1]))
		clients = append(clients, fmt.Sprintf("nats://127.0.0.1:%d", p[0]))
	}
	bin := testbed.CachedBin("nats-server")
	var servers []*deployProcess
	for i := range n {
		name := fmt.Sprintf("%s-%d", sts.Name, i)
		podDir := filepath.Join(dir, name)
		// Each volume is a directory; a ConfigMap's files are written into
		// it. Paths under a mount point are rewritten to it.
		var mounts [][2]string
		for _, vm := range c.VolumeMounts {
			vdir := filepath.Join(podDir, vm.Name)
			if err := os.MkdirAll(vdir, 0o755); err != nil {
				t.Fatal(err)
			}
			mounts = append(mounts, [2]string{vm.MountPath, vdir})
		}
		slices.SortFunc(mounts, func(a, b [2]string) int { return len(b[0]) - len(a[0]) })
		rewrite := func(s string) string {
			for _, mt := range mounts {
				s = strings.ReplaceAll(s, mt[0], mt[1])
			}
			return s
		}
		for _, v := range pod.Volumes {
			if v.ConfigMap == nil {
				continue
			}
			cm := deployTyped[corev1.ConfigMap](t, m, "ConfigMap", sts.Namespace, v.ConfigMap.Name)
			if _, ok := cm.Data["auth.conf"]; ok {
				cm.Data["auth.conf"] = string(authConf)
			}
			for file, content := range cm.Data {
				if err := os.WriteFile(filepath.Join(podDir, v.Name, file), []byte(rewrite(content)), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
		vars := deployEnv(t, m, sts.Namespace, name, pod, c)
		for ctl, pw := range hookPasswords {
			vars[natsauth.PasswordVariable(natsauth.HookUser(ctl))] = pw
		}
		args := deployExpand(c.Args, vars)
		for j := range args {
			args[j] = rewrite(args[j])
		}
		// Command-line flags override nats.conf: the test bed's addresses.
		args = append(args,
			"--addr=127.0.0.1",
			fmt.Sprintf("--port=%d", ps[i].client),
			fmt.Sprintf("--http_port=%d", ps[i].monitor),
			fmt.Sprintf("--cluster=nats://127.0.0.1:%d", ps[i].cluster),
			"--routes="+strings.Join(routes, ","),
		)
		p := deployStart(t, name, dir, bin, args, vars)
		for _, probe := range []*corev1.Probe{c.StartupProbe, c.LivenessProbe, c.ReadinessProbe} {
			p.probes = append(p.probes, fmt.Sprintf("http://127.0.0.1:%d%s", ps[i].monitor, probe.HTTPGet.Path))
		}
		servers = append(servers, p)
	}
	eventually(t, time.Minute, func() error {
		for _, s := range servers {
			if err := s.proc.Exited(); err != nil {
				return backoffStop{err}
			}
			for _, u := range s.probes {
				if err := deployGet(t.Context(), u); err != nil {
					return fmt.Errorf("%s: %w", s.name, err)
				}
			}
		}
		return nil
	})
	return strings.Join(clients, ",")
}

// deployGet fails unless GET url answers 200.
func deployGet(ctx context.Context, u string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s %s", u, resp.Status, bytes.TrimSpace(body))
	}
	return nil
}

// deployServiceAccountKubeconfig writes a kubeconfig for the test bed's API
// server with a token of the ServiceAccount namespace/name: what the pod
// would have in-cluster.
func deployServiceAccountKubeconfig(t *testing.T, namespace, name, path string) string {
	t.Helper()
	expiry := int64(3600)
	tok, err := env.kube.CoreV1().ServiceAccounts(namespace).CreateToken(t.Context(), name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["bed"] = &clientcmdapi.Cluster{Server: env.bed.APIServerURL(), CertificateAuthorityData: env.bed.RESTConfig().CAData}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: tok.Status.Token}
	cfg.Contexts["bed"] = &clientcmdapi.Context{Cluster: "bed", AuthInfo: name}
	cfg.CurrentContext = "bed"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

var (
	deployFlagsMu    sync.Mutex
	deployFlagsCache = map[string]map[string]bool{}
	deployFlagLine   = regexp.MustCompile(`(?m)^\s+(?:-[a-z], )?--([a-z0-9-]+)`)
)

// deployFlags lists the flags of uc role, from its -h.
func deployFlags(t *testing.T, role string) map[string]bool {
	t.Helper()
	deployFlagsMu.Lock()
	defer deployFlagsMu.Unlock()
	if f, ok := deployFlagsCache[role]; ok {
		return f
	}
	out, _ := exec.CommandContext(t.Context(), env.uc.bin, role, "-h").CombinedOutput()
	flags := map[string]bool{}
	for _, m := range deployFlagLine.FindAllStringSubmatch(string(out), -1) {
		flags[m[1]] = true
	}
	if !flags["nats-url"] {
		t.Fatalf("uc %s -h lists no --nats-url:\n%s", role, out)
	}
	deployFlagsCache[role] = flags
	return flags
}

// deployKubectl runs the test bed's kubectl in the repository against the
// test bed, with stdin if not nil, and returns its stdout; the error holds
// its stderr.
func deployKubectl(t *testing.T, stdin []byte, args ...string) (string, error) {
	t.Helper()
	ctx := t.Context()
	if ctx.Err() != nil { // in a Cleanup
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, testbed.CachedBin("kubectl"),
		append([]string{"--kubeconfig", env.bed.Kubeconfig()}, args...)...)
	cmd.Dir = env.root
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("kubectl %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// deployStartAggregator runs kube-controller-manager with only the
// clusterrole-aggregation controller, until t ends.
func deployStartAggregator(t *testing.T) {
	t.Helper()
	p, err := testbed.StartProcess("kube-controller-manager (clusterrole-aggregation)",
		testbed.CachedBin("kube-controller-manager"),
		filepath.Join(t.TempDir(), "clusterrole-aggregation.log"),
		"--kubeconfig="+env.bed.Kubeconfig(),
		"--controllers=clusterrole-aggregation",
		"--leader-elect=false",
		"--secure-port=0",
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(10 * time.Second) })
}
