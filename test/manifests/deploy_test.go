package manifests

// The checks of deploy/, the manifests of `kubectl apply -k deploy/`, that
// need no cluster: what they hold, and its NATS servers run from their
// configuration. test/e2e's TestDeploy checks the rest on the test bed.

import (
	"context"
	"maps"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"universalcontroller.dev/uc/internal/natsauth"
	"universalcontroller.dev/uc/internal/version"
	"universalcontroller.dev/uc/schemas/crds"
	"universalcontroller.dev/uc/test/testbed"
)

// The image deploy/ runs, and each role's replicas.
const deployImage = version.Image + ":" + version.Release

var deployReplicas = map[string]int32{"watcher": 2, "dispatcher": 1, "applier": 3}

// deploy is what `kubectl kustomize deploy` prints, built once.
var deploy = sync.OnceValues(func() (Set, error) {
	return Kustomize(context.Background(), filepath.Join(repoRoot, "deploy"))
})

func deployManifests(t *testing.T) Set {
	t.Helper()
	m, err := deploy()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestDeployObjects: deploy/ has its Namespace and everything namespaced
// is in it, and its CRDs are schemas/crds'.
func TestDeployObjects(t *testing.T) {
	m := deployManifests(t)
	if m.In("").Find("Namespace", Namespace) == nil {
		t.Errorf("no Namespace %s", Namespace)
	}
	for _, o := range m {
		if o.GetNamespace() != "" && o.GetNamespace() != Namespace {
			t.Errorf("%s %s is in namespace %s, not %s", o.GetKind(), o.GetName(), o.GetNamespace(), Namespace)
		}
	}

	// The CRDs are schemas/crds' (deploy/deploy_test.go checks the copy
	// byte for byte; this checks what kustomize makes of it).
	want, err := crds.All()
	if err != nil {
		t.Fatal(err)
	}
	if got := len(m.OfKind("CustomResourceDefinition")); got != len(want) {
		t.Errorf("%d CustomResourceDefinitions, schemas/crds has %d", got, len(want))
	}
	for _, crd := range want {
		got := Typed[apiextensionsv1.CustomResourceDefinition](t, m.In(""), "CustomResourceDefinition", crd.Name)
		if !equality.Semantic.DeepEqual(got.Spec, crd.Spec) {
			t.Errorf("CustomResourceDefinition %s differs from schemas/crds; run: go test ./deploy -run TestCRDs -update", crd.Name)
		}
	}
}

// TestDeployRoles: each role is a Deployment of the image's entrypoint,
// with its replicas, its own ServiceAccount bound to an aggregated
// ClusterRole, variables that are flags of the role, probes and ports on
// uc's addresses, its own NATS user and resources.
func TestDeployRoles(t *testing.T) {
	m := deployManifests(t)
	ns := m.In(Namespace)
	uc := BuildUC(t)
	passwords, err := ns.Secret(Namespace, passwordsSecret(t, m))
	if err != nil {
		t.Fatal(err)
	}
	for _, role := range Roles {
		name := "uc-" + role
		d := Typed[appsv1.Deployment](t, ns, "Deployment", name)
		if d.Spec.Replicas == nil || *d.Spec.Replicas != deployReplicas[role] {
			t.Errorf("Deployment %s: replicas %v, want %d", name, d.Spec.Replicas, deployReplicas[role])
		}
		pod := d.Spec.Template.Spec
		if pod.ServiceAccountName != name || ns.Find("ServiceAccount", name) == nil {
			t.Errorf("Deployment %s runs as ServiceAccount %q; want its own, %s, in deploy/", name, pod.ServiceAccountName, name)
		}
		checkBinding(t, m, role)
		if len(pod.Containers) != 1 {
			t.Fatalf("Deployment %s: %d containers, want 1", name, len(pod.Containers))
		}
		c := pod.Containers[0]
		if c.Image != deployImage {
			t.Errorf("%s: image %s, want %s", name, c.Image, deployImage)
		}
		if len(c.Command) != 0 || len(c.Args) == 0 || c.Args[0] != role {
			t.Errorf("%s: command %q args %q; want the image's entrypoint with args [%s ...]", name, c.Command, c.Args, role)
		}
		vars, err := testbed.ContainerEnv(m, testbed.Pod{Namespace: d.Namespace, Name: name + "-0", Spec: pod}, c)
		if err != nil {
			t.Fatal(err)
		}
		flags, err := RoleFlags(t.Context(), uc, role)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range unknownFlags(vars, flags) {
			flag, _ := FlagOf(v)
			t.Errorf("%s sets %s, but uc %s has no flag --%s", name, v, role, flag)
		}
		checkPorts(t, name, c, vars)
		// Its password and the servers' CA, files of its volumes.
		objs := WithNATSTLS(t, m, Typed[appsv1.StatefulSet](t, ns, "StatefulSet", "nats"))
		rewrite, err := testbed.MountVolumes(objs, testbed.Pod{Namespace: d.Namespace, Name: name + "-0", Spec: pod}, c, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		password, _ := os.ReadFile(rewrite(vars["UC_NATS_PASSWORD_FILE"]))
		if user := natsauth.RoleUser(role); vars["UC_NATS_USER"] != user || len(password) == 0 || string(password) != string(passwords.Data[natsauth.PasswordVariable(user)]) {
			t.Errorf("%s: connects to NATS as %q with the password of %s; want its own user %s, with the password the NATS servers have", name, vars["UC_NATS_USER"], vars["UC_NATS_PASSWORD_FILE"], user)
		}
		tlsSecret, err := objs.Secret(Namespace, "uc-nats-tls")
		if err != nil {
			t.Fatal(err)
		}
		if ca, _ := os.ReadFile(rewrite(vars["UC_NATS_TLS_CA"])); len(ca) == 0 || string(ca) != string(tlsSecret.Data["ca.crt"]) {
			t.Errorf("%s: verifies the NATS servers with %q; want ca.crt of the Secret uc-nats-tls", name, vars["UC_NATS_TLS_CA"])
		}
		if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
			t.Errorf("%s: resources %v; want cpu and memory requests and a memory limit", name, c.Resources)
		}
	}
}

// unknownFlags are the UC_ variables of vars that name no flag of flags,
// sorted.
func unknownFlags(vars map[string]string, flags map[string]bool) []string {
	var unknown []string
	for _, k := range slices.Sorted(maps.Keys(vars)) {
		if flag, ok := FlagOf(k); ok && !flags[flag] {
			unknown = append(unknown, k)
		}
	}
	return unknown
}

// passwordsSecret is the name kustomize gave the Secret of the NATS users'
// passwords, uc-nats-passwords.
func passwordsSecret(t *testing.T, m Set) string {
	t.Helper()
	for _, o := range m.OfKind("Secret") {
		if strings.HasPrefix(o.GetName(), "uc-nats-passwords") {
			return o.GetName()
		}
	}
	t.Fatal("deploy/ has no Secret uc-nats-passwords")
	return ""
}

// configMapName is the name kustomize gave the uc-config ConfigMap (with
// its content hash), found through the watcher's envFrom.
func configMapName(t *testing.T, m Set) string {
	t.Helper()
	d := Typed[appsv1.Deployment](t, m.In(Namespace), "Deployment", "uc-watcher")
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

// checkBinding checks that a ClusterRoleBinding binds the role's
// ServiceAccount to an aggregated ClusterRole selecting
// universalcontroller.dev/aggregate-to-<role>, and that deploy/ holds a
// base ClusterRole with that label.
func checkBinding(t *testing.T, m Set, role string) {
	t.Helper()
	sa, label := "uc-"+role, AggregateLabel+role
	var bound []string
	for _, u := range m.OfKind("ClusterRoleBinding") {
		b := Typed[rbacv1.ClusterRoleBinding](t, m.In(""), "ClusterRoleBinding", u.GetName())
		if slices.ContainsFunc(b.Subjects, func(s rbacv1.Subject) bool {
			return s.Kind == "ServiceAccount" && s.Name == sa && s.Namespace == Namespace
		}) {
			bound = append(bound, b.RoleRef.Name)
		}
	}
	if len(bound) != 1 {
		t.Errorf("ServiceAccount %s is bound to ClusterRoles %q; want exactly one, aggregated", sa, bound)
		return
	}
	cr := Typed[rbacv1.ClusterRole](t, m.In(""), "ClusterRole", bound[0])
	if cr.AggregationRule == nil || !slices.ContainsFunc(cr.AggregationRule.ClusterRoleSelectors, func(s metav1.LabelSelector) bool {
		return s.MatchLabels[label] == "true"
	}) {
		t.Errorf("ClusterRole %s does not aggregate ClusterRoles labelled %s", cr.Name, label)
	}
	if len(cr.Rules) != 0 {
		t.Errorf("ClusterRole %s is aggregated; its rules belong in ClusterRoles labelled %s", cr.Name, label)
	}
	if !slices.ContainsFunc(m.OfKind("ClusterRole"), func(u *unstructured.Unstructured) bool { return u.GetLabels()[label] == "true" }) {
		t.Errorf("no ClusterRole labelled %s in deploy/", label)
	}
}

// checkPorts checks that the probes ask uc's health address, and that the
// named ports are the addresses uc listens on.
func checkPorts(t *testing.T, name string, c corev1.Container, vars map[string]string) {
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

// TestDeployNATS: the uc-config URL names the client Service of a 3-node
// StatefulSet, the streams are replicated on all three, and nats.conf
// matches the StatefulSet.
func TestDeployNATS(t *testing.T) {
	m := deployManifests(t)
	ns := m.In(Namespace)
	cfg, err := ns.ConfigMap(Namespace, configMapName(t, m))
	if err != nil {
		t.Fatal(err)
	}
	sts := Typed[appsv1.StatefulSet](t, ns, "StatefulSet", "nats")
	if sts.Spec.Replicas == nil || *sts.Spec.Replicas != 3 {
		t.Errorf("StatefulSet nats: replicas %v, want 3", sts.Spec.Replicas)
	}
	if got := cfg.Data["UC_STREAM_REPLICAS"]; got != "3" {
		t.Errorf("UC_STREAM_REPLICAS is %q, want 3, the NATS servers", got)
	}
	if len(sts.Spec.VolumeClaimTemplates) != 1 {
		t.Errorf("StatefulSet nats: %d volume claim templates, want 1 for JetStream's files", len(sts.Spec.VolumeClaimTemplates))
	}
	headless := Typed[corev1.Service](t, ns, "Service", sts.Spec.ServiceName)
	if headless.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("Service %s of the StatefulSet is not headless", headless.Name)
	}
	u, err := url.Parse(cfg.Data["UC_NATS_URL"])
	if err != nil {
		t.Fatalf("UC_NATS_URL: %v", err)
	}
	client := Typed[corev1.Service](t, ns, "Service", u.Hostname())
	if !slices.ContainsFunc(client.Spec.Ports, func(p corev1.ServicePort) bool { return strconv.Itoa(int(p.Port)) == u.Port() }) {
		t.Errorf("Service %s has no port %s (UC_NATS_URL %s)", client.Name, u.Port(), u)
	}
	for k, v := range client.Spec.Selector {
		if sts.Spec.Template.Labels[k] != v {
			t.Errorf("Service %s selects %s=%s, which the NATS pods lack", client.Name, k, v)
		}
	}
	checkNATSConf(t, m, sts)
}

// checkNATSConf checks nats.conf against the StatefulSet: its ports are
// the container's, and its routes name every server through the headless
// Service, with the route password every server requires (CheckRoutes).
func checkNATSConf(t *testing.T, m Set, sts *appsv1.StatefulSet) {
	t.Helper()
	conf := StatefulSetNATSConf(t, m, sts)
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
	CheckRoutes(t, conf, sts)
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
	for _, role := range Roles {
		if pw := users[natsauth.RoleUser(role)]; pw == "" {
			t.Errorf("nats.conf: no user %s with a password (users: %v)", natsauth.RoleUser(role), slices.Sorted(maps.Keys(users)))
		}
	}
}

// TestDeployNATSRoutes: the NATS servers of deploy/ require the route
// password of the Secret uc-nats-routes, and join each other with it: a
// server without it, or with another, is refused (CheckRouteAuth runs
// them as their Pods would).
func TestDeployNATSRoutes(t *testing.T) {
	m := deployManifests(t)
	sts := Typed[appsv1.StatefulSet](t, m.In(Namespace), "StatefulSet", "nats")
	conf := StatefulSetNATSConf(t, m, sts)
	CheckRoutes(t, conf, sts)
	var secret string
	for _, o := range m.OfKind("Secret") {
		if strings.HasPrefix(o.GetName(), "uc-nats-routes-") {
			secret = o.GetName()
		}
	}
	routes, err := m.Secret(Namespace, secret)
	if err != nil {
		t.Fatal(err)
	}
	auth, _ := conf["cluster"].(map[string]any)["authorization"].(map[string]any)
	if pw := string(routes.Data["UC_NATS_ROUTE_PASSWORD"]); pw == "" || auth["password"] != pw {
		t.Errorf("the route password of nats.conf is not UC_NATS_ROUTE_PASSWORD of the Secret uc-nats-routes (%q)", pw)
	}
	CheckRouteAuth(t, m, sts)
}

// TestDeployNATSTLS: the NATS bus of deploy/ is closed: its three
// servers, run as real nats-server processes from the shipped
// configuration with a certificate of a test CA in the Secret uc-nats-tls,
// join each other over mutual TLS with the route password; a server with a
// certificate of another CA, without one, or without the password cannot;
// a client without TLS is refused; a role connects over TLS; a hook
// worker's user cannot read another controller's subjects (CheckNATSTLS).
// Then a rotated password and certificate take effect without a restart
// (CheckNATSRotation).
func TestDeployNATSTLS(t *testing.T) {
	m := deployManifests(t)
	servers, objs := CheckNATSTLS(t, m, Typed[appsv1.StatefulSet](t, m.In(Namespace), "StatefulSet", "nats"))
	CheckNATSRotation(t, servers, objs.TLS.CA)
}

// TestDeployNetworkPolicy: deploy/'s NetworkPolicy lets only the NATS
// servers reach their route port, and only uc's roles and hook workers
// their client port.
func TestDeployNetworkPolicy(t *testing.T) {
	m := deployManifests(t)
	ns := m.In(Namespace)
	var roles []map[string]string
	for _, role := range Roles {
		roles = append(roles, Typed[appsv1.Deployment](t, ns, "Deployment", "uc-"+role).Spec.Template.Labels)
	}
	CheckNATSNetworkPolicy(t, m, Typed[appsv1.StatefulSet](t, ns, "StatefulSet", "nats"), roles)
}

// TestDeployMetrics: every role serves its metrics securely, may ask the
// API server who a scraper is and what it may do, and deploy/ has the
// ClusterRole a scraper is bound to.
func TestDeployMetrics(t *testing.T) {
	CheckSecureMetrics(t, deployManifests(t), "uc")
}
