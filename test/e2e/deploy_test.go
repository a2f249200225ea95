package e2e

// TestDeploy checks deploy/ on the test bed; test/manifests checks what
// needs no cluster.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"universalcontroller.dev/uc/examples/foo"
	"universalcontroller.dev/uc/internal/natsauth"
	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/v1alpha1"
	"universalcontroller.dev/uc/sdk/go/hook"
	"universalcontroller.dev/uc/test/manifests"
	"universalcontroller.dev/uc/test/testbed"
)

// apps is the API group of Deployments and StatefulSets.
const apps = "apps"

// deployGadgetUC is the UniversalController TestDeploy runs on the roles
// of deploy/, for the Gadgets of deployGadgetGVR.
const deployGadgetUC = "deploy-gadget-controller"

var deployGadgetGVR = schema.GroupVersionResource{Group: "deploy.e2e.universalcontroller.dev", Version: "v1", Resource: "gadgets"}

// TestDeploy checks deploy/, the manifests of `kubectl apply -k deploy/`,
// on the test bed: that the API server accepts every object (server-side
// dry run), that the RBAC is least privilege, and that the roles, run
// with exactly the flags and environment the manifests give them and with
// their ServiceAccounts' rights, run a controller end to end on a NATS
// cluster configured as the manifests configure it. (What the manifests
// hold is checked without a cluster by test/manifests.)
func TestDeploy(t *testing.T) {
	m, err := manifests.Kustomize(t.Context(), filepath.Join(env.root, "deploy"))
	if err != nil {
		t.Fatal(err)
	}
	t.Run("ServerDryRun", func(t *testing.T) { deployDryRun(t, m) })

	// The test bed's controller manager does not aggregate ClusterRoles;
	// this one does only that.
	deployStartAggregator(t)
	noWorkloads, err := m.Filter(func(u *unstructured.Unstructured) bool {
		return u.GetKind() != "Deployment" && u.GetKind() != "StatefulSet"
	}).YAML()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := deployKubectl(t, noWorkloads, "apply", "-f", "-"); err != nil {
		t.Fatalf("install deploy/ without its workloads: %v", err)
	}
	if !t.Run("LeastPrivilege", deployLeastPrivilege) {
		return
	}
	t.Run("RoleProcesses", func(t *testing.T) { deployRoleProcesses(t, m) })
}

// deployDryRun has the API server validate every object of deploy/ and
// deploy/examples/, with strict field validation, without persisting them.
func deployDryRun(t *testing.T, m manifests.Set) {
	// Objects in uc-system cannot be dry-run before the namespace exists.
	namespaces, err := m.OfKind("Namespace").YAML()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := deployKubectl(t, namespaces, "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	out, err := deployKubectl(t, nil, "apply", "--dry-run=server", "--validate=strict", "-k", "deploy")
	if err != nil {
		t.Fatalf("server-side dry run of deploy/: %v", err)
	}
	if n := strings.Count(out, "(server dry run)"); n != len(m) {
		t.Errorf("the dry run reported on %d objects, deploy/ has %d:\n%s", n, len(m), out)
	}
	t.Logf("kubectl apply --dry-run=server -k deploy/:\n%s", out)
	if out, err = deployKubectl(t, nil, "apply", "--dry-run=server", "--validate=strict", "-f", "deploy/examples"); err != nil {
		t.Fatalf("server-side dry run of deploy/examples/: %v", err)
	}
	t.Logf("kubectl apply --dry-run=server -f deploy/examples/:\n%s", out)

	// The dry run validates: a field the API does not know fails it.
	bad, err := manifests.WithMisspeltField(m.In(manifests.Namespace).Find("Deployment", "uc-applier"))
	if err != nil {
		t.Fatal(err)
	}
	y, _ := yaml.Marshal(bad.Object)
	if _, err := deployKubectl(t, y, "apply", "--dry-run=server", "--validate=strict", "-f", "-"); err == nil || !strings.Contains(err.Error(), manifests.MisspeltField) {
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
			User:   "system:serviceaccount:" + manifests.Namespace + ":uc-" + a.role,
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + manifests.Namespace, "system:authenticated"},
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
		uc, sample, coord = "universalcontroller.dev", "samplecontroller.k8s.io", "coordination.k8s.io"
		ns                = "some-namespace"
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
		// Secure metrics: who a scraper is, and whether it may.
		{role: "watcher", verb: "create", group: "authentication.k8s.io", resource: "tokenreviews", want: true},
		{role: "dispatcher", verb: "create", group: "authentication.k8s.io", resource: "tokenreviews", want: true},
		{role: "applier", verb: "create", group: "authentication.k8s.io", resource: "tokenreviews", want: true},
		{role: "watcher", verb: "create", group: "authorization.k8s.io", resource: "subjectaccessreviews", want: true},
		{role: "dispatcher", verb: "create", group: "authorization.k8s.io", resource: "subjectaccessreviews", want: true},
		{role: "applier", verb: "create", group: "authorization.k8s.io", resource: "subjectaccessreviews", want: true},
		{role: "dispatcher", verb: "patch", group: uc, resource: "universalcontrollers", sub: "status", want: true},
		{role: "dispatcher", verb: "patch", group: uc, resource: "universaldecorators", sub: "status", want: true},
		{role: "applier", verb: "patch", group: uc, resource: "universaldecorators"},
		{role: "watcher", verb: "patch", group: uc, resource: "universaldecorators", sub: "status"},
	}
	if !t.Run("the RBAC of deploy alone", func(t *testing.T) {
		deployAwaitAccess(t, time.Minute, base...)
		deployCheckAccess(t, []deployAccess{
			{role: "applier", verb: "patch", group: apps, resource: "deployments", namespace: ns},
			{role: "applier", verb: "list", group: apps, resource: "deployments"},
			{role: "watcher", verb: "list", group: sample, resource: "foos"},
			{role: "dispatcher", verb: "list", group: apps, resource: "deployments"},
		})
	}) {
		return
	}

	t.Cleanup(func() {
		_, _ = deployKubectl(t, nil, "delete", "--ignore-not-found", "-f", "deploy/examples/foo-controller-rbac.yaml")
	})
	if _, err := deployKubectl(t, nil, "apply", "-f", "deploy/examples/foo-controller-rbac.yaml"); err != nil {
		t.Fatal(err)
	}
	t.Run("with the Foo example's RBAC", func(t *testing.T) {
		deployAwaitAccess(t, time.Minute, deployAccess{role: "applier", verb: "patch", group: apps, resource: "deployments", namespace: ns, want: true})

		deployCheckAccess(t, append(base, []deployAccess{
			// The watcher reads: UniversalControllers, the Foo controller's
			// kinds, namespaces; and holds its Lease, in uc-system only.
			{role: "watcher", verb: "list", group: sample, resource: "foos", want: true},
			{role: "watcher", verb: "watch", group: apps, resource: "deployments", want: true},
			{role: "watcher", verb: "list", resource: "namespaces", want: true},
			{role: "watcher", verb: "create", group: coord, resource: "leases", namespace: manifests.Namespace, want: true},
			{role: "watcher", verb: "update", group: coord, resource: "leases", namespace: manifests.Namespace, name: "uc-watcher", want: true},
			{role: "watcher", verb: "update", group: coord, resource: "leases", namespace: manifests.Namespace, name: "someone-elses"},
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
			{role: "applier", verb: "update", group: sample, resource: "foos", sub: "finalizers", namespace: ns, want: true},
			// The Foo controller has no finalize hook: its parents are not patched.
			{role: "applier", verb: "patch", group: sample, resource: "foos", namespace: ns},
			{role: "applier", verb: "update", group: apps, resource: "deployments", namespace: ns},
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
			{role: "applier", verb: "update", group: coord, resource: "leases", namespace: manifests.Namespace, name: "uc-watcher"},
			{role: "applier", verb: "create", group: "rbac.authorization.k8s.io", resource: "clusterrolebindings"},
			{role: "applier", verb: "impersonate", resource: "serviceaccounts", namespace: manifests.Namespace},

			// The dispatcher reports on UniversalControllers and caches the
			// controller's kinds.
			{role: "dispatcher", verb: "create", resource: "events", namespace: "default", want: true},
			{role: "dispatcher", verb: "watch", group: sample, resource: "foos", want: true},
			// ... and writes nothing else, and reads no credentials: the Foo
			// controller's hook is on the bus.
			{role: "dispatcher", verb: "get", resource: "secrets", namespace: ns},
			{role: "dispatcher", verb: "get", resource: "configmaps", namespace: ns},
			{role: "dispatcher", verb: "watch", resource: "services"},
			{role: "dispatcher", verb: "list", resource: "secrets"},
			{role: "dispatcher", verb: "watch", resource: "secrets", namespace: ns},
			{role: "dispatcher", verb: "create", resource: "secrets", namespace: ns},
			{role: "dispatcher", verb: "update", group: uc, resource: "universalcontrollers"},
			{role: "dispatcher", verb: "delete", group: uc, resource: "universalcontrollers"},
			{role: "dispatcher", verb: "create", group: apps, resource: "deployments", namespace: ns},
			{role: "dispatcher", verb: "patch", group: sample, resource: "foos", sub: "status", namespace: ns},
			{role: "dispatcher", verb: "patch", group: sample, resource: "foos", namespace: ns},
			{role: "dispatcher", verb: "update", group: coord, resource: "leases", namespace: manifests.Namespace, name: "uc-watcher"},
			{role: "dispatcher", verb: "bind", group: "rbac.authorization.k8s.io", resource: "clusterroles"},
			{role: "dispatcher", verb: "escalate", group: "rbac.authorization.k8s.io", resource: "clusterroles"},
		}...))
	})

	t.Run("with uc rbac of a controller with webhooks, a destination and related objects", deployHooksRBAC)
	t.Run("uc's kinds in view, edit and admin", deployUserRoles)
}

// deployUserRoles binds a user to each of Kubernetes' view, edit and admin
// ClusterRoles, into which deploy/ aggregates uc's kinds, and asks what
// each may do with them.
func deployUserRoles(t *testing.T) {
	const uc = "universalcontroller.dev"
	for _, role := range []string{"view", "edit", "admin"} {
		b := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "uc-e2e-" + role},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "uc-e2e-" + role}}}
		if _, err := env.kube.RbacV1().ClusterRoleBindings().Create(t.Context(), b, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = env.kube.RbacV1().ClusterRoleBindings().Delete(context.Background(), b.Name, metav1.DeleteOptions{})
		})
	}
	type access struct {
		user, verb, resource string
		want                 bool
	}
	can := func(a access) error {
		sar, err := env.kube.AuthorizationV1().SubjectAccessReviews().Create(t.Context(), &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{User: "uc-e2e-" + a.user, Groups: []string{"system:authenticated"},
				ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: a.verb, Group: uc, Resource: a.resource, Namespace: "x"}},
		}, metav1.CreateOptions{})
		switch {
		case err != nil:
			return err
		case sar.Status.Allowed != a.want:
			return fmt.Errorf("%s %s %s: allowed=%t, want %t", a.user, a.verb, a.resource, sar.Status.Allowed, a.want)
		}
		return nil
	}
	var accesses []access
	for _, user := range []string{"view", "edit", "admin"} {
		writes := user != "view"
		for _, res := range []string{"universalcontrollers", "universaldecorators", "controllerrevisions"} {
			accesses = append(accesses, access{user, "list", res, true}, access{user, "watch", res, true}, access{user, "get", res, true})
		}
		for _, verb := range []string{"create", "update", "patch", "delete"} {
			accesses = append(accesses, access{user, verb, "universalcontrollers", writes}, access{user, verb, "universaldecorators", writes},
				access{user, verb, "controllerrevisions", false})
		}
		accesses = append(accesses, access{user, "patch", "universalcontrollers/status", false})
	}
	eventually(t, time.Minute, func() error {
		for _, a := range accesses {
			if err := can(a); err != nil {
				return err
			}
		}
		return nil
	})
}

// deployHooksRBAC applies what uc rbac makes of a controller whose webhooks
// read Secrets and a ConfigMap in two namespaces, whose finalize hook is a
// Knative Service and whose customize hook names ConfigMaps, and asks the
// API server, as each role, for what the role does with it: allowed; and
// for what it does not: denied, down to the Secrets the dispatcher may get.
func deployHooksRBAC(t *testing.T) {
	const sample, knative = "samplecontroller.k8s.io", "serving.knative.dev"
	for _, ns := range []string{"hooks", "shared"} {
		if _, err := env.kube.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	out, err := exec.CommandContext(t.Context(), env.uc.bin, "rbac", "--related", "core/configmaps",
		filepath.Join(env.root, "internal/rbac/testdata/hooks-controller.yaml"), filepath.Join(env.root, "examples/foo/crd.yaml")).Output()
	if err != nil {
		t.Fatalf("uc rbac: %v", err)
	}
	t.Cleanup(func() { _, _ = deployKubectl(t, out, "delete", "--ignore-not-found", "-f", "-") })
	if _, err := deployKubectl(t, out, "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	allowed := []deployAccess{
		// Every role caches the parents and children.
		{role: "watcher", verb: "watch", group: sample, resource: "foos"},
		{role: "dispatcher", verb: "list", group: apps, resource: "statefulsets"},
		{role: "applier", verb: "watch", resource: "configmaps"},
		// The watcher watches the related objects (--related).
		{role: "watcher", verb: "list", resource: "configmaps"},
		// The applier patches the parents (the finalize hook: uc's
		// finalizer) and writes the children.
		{role: "applier", verb: "get", group: sample, resource: "foos", namespace: "x"},
		{role: "applier", verb: "patch", group: sample, resource: "foos", namespace: "x"},
		{role: "applier", verb: "patch", group: sample, resource: "foos", sub: "status", namespace: "x"},
		{role: "applier", verb: "update", group: sample, resource: "foos", sub: "finalizers", namespace: "x"},
		{role: "applier", verb: "create", group: apps, resource: "statefulsets", namespace: "x"},
		{role: "applier", verb: "patch", resource: "configmaps", namespace: "x"},
		{role: "applier", verb: "delete", resource: "configmaps", namespace: "x"},
		{role: "applier", verb: "get", group: apps, resource: "statefulsets", namespace: "x"},
		// The dispatcher watches the finalize hook's Knative Service, and
		// gets the webhooks' credentials by name.
		{role: "dispatcher", verb: "watch", group: knative, resource: "services"},
		{role: "dispatcher", verb: "list", group: knative, resource: "services"},
		{role: "dispatcher", verb: "get", resource: "secrets", namespace: "hooks", name: "sync-token"},
		{role: "dispatcher", verb: "get", resource: "configmaps", namespace: "hooks", name: "hooks-ca"},
		{role: "dispatcher", verb: "get", resource: "secrets", namespace: "shared", name: "other-login"},
	}
	for i := range allowed {
		allowed[i].want = true
	}
	deployAwaitAccess(t, time.Minute, allowed...)
	deployCheckAccess(t, []deployAccess{
		{role: "applier", verb: "delete", group: sample, resource: "foos", namespace: "x"},
		{role: "applier", verb: "create", group: sample, resource: "foos", namespace: "x"},
		{role: "applier", verb: "update", group: apps, resource: "statefulsets", namespace: "x"},
		// Not a child of this controller (nor of the Foo example's, whose
		// RBAC TestDeploy applies too: Deployments).
		{role: "applier", verb: "create", group: apps, resource: "daemonsets", namespace: "x"},
		{role: "applier", verb: "get", resource: "secrets", namespace: "hooks", name: "sync-token"},
		{role: "watcher", verb: "get", resource: "secrets", namespace: "hooks", name: "sync-token"},
		{role: "watcher", verb: "patch", group: sample, resource: "foos", namespace: "x"},
		{role: "watcher", verb: "watch", group: knative, resource: "services"},
		{role: "dispatcher", verb: "patch", group: sample, resource: "foos", sub: "status", namespace: "x"},
		{role: "dispatcher", verb: "create", resource: "configmaps", namespace: "x"},
		// Only the named credentials, only in their namespaces.
		{role: "dispatcher", verb: "get", resource: "secrets", namespace: "hooks", name: "another-secret"},
		{role: "dispatcher", verb: "get", resource: "secrets", namespace: "hooks"},
		{role: "dispatcher", verb: "list", resource: "secrets", namespace: "hooks"},
		{role: "dispatcher", verb: "watch", resource: "secrets", namespace: "hooks"},
		{role: "dispatcher", verb: "get", resource: "secrets", namespace: "kube-system", name: "sync-token"},
		{role: "dispatcher", verb: "get", resource: "configmaps", namespace: "shared", name: "hooks-ca"},
		{role: "dispatcher", verb: "update", resource: "secrets", namespace: "hooks", name: "sync-token"},
		// An endpoint config no webhook's URL matches reads nothing.
		{role: "dispatcher", verb: "get", resource: "secrets", namespace: "shared", name: "unused-cert"},
		{role: "dispatcher", verb: "watch", resource: "services"},
	})
}

// deployRoleProcesses runs every role of deploy/ as processes, with the
// replicas, arguments and environment of its Deployment and the rights of
// its ServiceAccount, on NATS servers run from the StatefulSet's arguments
// and nats.conf; only addresses and paths are the test bed's. Then a
// controller works end to end: a Gadget gets its Deployment, its status
// and uc's finalizer, and is finalized when deleted.
func deployRoleProcesses(t *testing.T, m manifests.Set) {
	ctx := t.Context()
	dir := t.TempDir()

	// The Gadget controller's kinds and RBAC, by the documented pattern
	// (test/manifests' TestRBACPattern checks it is).
	if err := applyFile(ctx, filepath.Join(env.root, "test/e2e/testdata/deploy-gadget-crd.yaml")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, func() error {
		_, err := env.dyn.Resource(deployGadgetGVR).List(ctx, metav1.ListOptions{Limit: 1})
		return err
	})
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
	natsURL, natsCA, objs := deployStartNATS(t, m, filepath.Join(dir, "nats"), map[string]string{deployGadgetUC: hookPassword})

	// A scraper of the roles' secure /metrics: bound to deploy/'s
	// uc-metrics-reader, as a Prometheus would be.
	scraper := scraperToken(t, manifests.Namespace, "uc-metrics-reader")
	var procs []*testbed.Container
	for _, role := range manifests.Roles {
		d := manifests.Typed[appsv1.Deployment](t, m.In(manifests.Namespace), "Deployment", "uc-"+role)
		for i := range *d.Spec.Replicas {
			procs = append(procs, deployStartRolePod(t, env.uc.bin, objs, d, role, i, dir, natsURL, scraper))
		}
	}
	running := func() error {
		for _, p := range procs {
			if err := p.Check(); errors.Is(err, testbed.ErrRestarted) {
				return err
			} else if err != nil {
				return backoffStop{err}
			}
		}
		return nil
	}
	if !t.Run("every probe of every process answers 200", func(t *testing.T) {
		eventually(t, time.Minute, func() error {
			if err := running(); err != nil {
				return err
			}
			for _, p := range procs {
				if err := p.Ready(ctx); err != nil {
					return err
				}
			}
			return nil
		})
	}) {
		return
	}
	if !t.Run("one watcher leads, holding the Lease in uc-system", func(t *testing.T) {
		eventually(t, 30*time.Second, func() error {
			if err := running(); err != nil {
				return err
			}
			lease, err := env.kube.CoordinationV1().Leases(manifests.Namespace).Get(ctx, "uc-watcher", metav1.GetOptions{})
			if err != nil {
				return err
			}
			var leaders []string
			for _, p := range procs {
				if strings.Contains(p.Log(), "leading: this watcher is active") {
					leaders = append(leaders, p.Name())
				}
			}
			if len(leaders) != 1 || lease.Spec.HolderIdentity == nil {
				return fmt.Errorf("leading watchers %q, lease holder %v", leaders, lease.Spec.HolderIdentity)
			}
			return nil
		})
	}) {
		return
	}

	// A hook worker on the manifests' NATS: the Foo example's sync hook, and
	// a finalize hook that lets go at once.
	hookUser := bus.Connection{URL: natsURL, User: natsauth.HookUser(deployGadgetUC), Password: hookPassword,
		TLSCA: natsCA, InboxPrefix: bus.HookInbox(deployGadgetUC)}
	js := jetStreamAs(t, hookUser, "gadget-worker")
	var finalized sync.Map
	runHookWorker(t, js, deployGadgetUC,
		hook.Sync(foo.Sync),
		hook.Finalize(func(_ context.Context, req *hook.SyncRequest) (*hook.SyncResponse, error) {
			finalized.Store(req.Parent.GetName(), true)
			return &hook.SyncResponse{Finalized: true}, nil
		}),
	)
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
	if !t.Run("a Gadget gets its Deployment, uc's finalizer and its status", func(t *testing.T) {
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
	}) {
		return
	}

	if !t.Run("a deleted Gadget is finalized", func(t *testing.T) {
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
	}) {
		return
	}

	t.Run("no role was refused anything", func(t *testing.T) {
		// Nothing a role did on the Gadget controller's kinds, nor on NATS, was
		// refused.
		for _, p := range procs {
			if p.Restarts() > 0 {
				t.Logf("%s was restarted %d times", p.Name(), p.Restarts())
			}
			for _, line := range strings.Split(p.Log(), "\n") {
				l := strings.ToLower(line)
				if strings.Contains(l, "forbidden") && (strings.Contains(l, "gadget") || strings.Contains(l, "deployments")) {
					t.Errorf("%s: %s", p.Name(), line)
				}
				if strings.Contains(line, "NATS refused") { // its NATS user lacks a permission
					t.Errorf("%s: %s", p.Name(), line)
				}
			}
		}
	})
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
		cr := rbacv1.ClusterRole{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
			ObjectMeta: metav1.ObjectMeta{Name: "uc-e2e-deploy-" + ctl.Name + "-read", Labels: map[string]string{}}}
		for _, role := range manifests.Roles {
			cr.Labels[manifests.AggregateLabel+role] = "true"
		}
		for _, r := range append([]v1alpha1.ResourceRule{ctl.Spec.ParentResource.ResourceRule}, childRules(ctl.Spec.ChildResources)...) {
			gv, _ := schema.ParseGroupVersion(r.APIVersion)
			cr.Rules = append(cr.Rules, rbacv1.PolicyRule{APIGroups: []string{gv.Group}, Resources: []string{r.Resource}, Verbs: []string{"list", "watch"}})
		}
		objs = append(objs, cr)
		r := cr.Rules[0]
		accesses = append(accesses, deployAccess{role: "dispatcher", verb: "list", group: r.APIGroups[0], resource: r.Resources[0], want: true})
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

func childRules(children []v1alpha1.ChildResource) []v1alpha1.ResourceRule {
	var out []v1alpha1.ResourceRule
	for _, c := range children {
		out = append(out, c.ResourceRule)
	}
	return out
}

// runHookWorker serves the hooks of controller on js until the test ends, each
// served again a second after it fails, as a hook worker's Deployment
// would restart it.
func runHookWorker(t *testing.T, js jetstream.JetStream, controller string, handlers ...hook.Handler) {
	ctx, stop := context.WithCancel(context.WithoutCancel(t.Context()))
	var workers sync.WaitGroup
	t.Cleanup(func() { stop(); workers.Wait() })
	for _, h := range handlers {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for {
				err := hook.Serve(ctx, js, controller, h)
				if ctx.Err() != nil {
					return
				}
				t.Logf("%s %s worker: %v; serving again", controller, h.Hook(), err)
				select {
				case <-ctx.Done():
					return
				case <-time.After(time.Second):
				}
			}
		}()
	}
}

// deployStartRolePod starts replica i of role's Deployment d with uc bin
// (deployStartRole), on the NATS servers of natsURL and with a kubeconfig
// of the Deployment's ServiceAccount.
func deployStartRolePod(t *testing.T, bin string, objs manifests.Objects, d *appsv1.Deployment, role string, i int32, dir, natsURL, scraper string) *testbed.Container {
	t.Helper()
	kubeconfig := filepath.Join(dir, d.Name+".kubeconfig")
	if err := env.bed.ServiceAccountKubeconfig(t.Context(), d.Namespace, d.Spec.Template.Spec.ServiceAccountName, kubeconfig); err != nil {
		t.Fatal(err)
	}
	flags, err := manifests.RoleFlags(t.Context(), bin, role)
	if err != nil {
		t.Fatal(err)
	}
	return deployStartRole(t, bin, objs, d, i, flags, dir, map[string]string{
		"UC_NATS_URL":   natsURL,
		"UC_KUBECONFIG": kubeconfig,
	}, scraper)
}

// deployStartRole starts replica i of a uc Deployment, uc being bin, as
// the kubelet would (testbed.StartContainer): the container's args, its
// volumes, and its environment with the variables of set replaced and the health and
// metrics addresses moved to free loopback ports; its probes, and its
// /metrics if uc serves them, are asked there (secure metrics with
// scrapeToken, as Prometheus scrapes them).
func deployStartRole(t *testing.T, bin string, objs manifests.Objects, d *appsv1.Deployment, i int32, flags map[string]bool, dir string, set map[string]string, scrapeToken string) *testbed.Container {
	t.Helper()
	pod := testbed.Pod{Namespace: d.Namespace, Name: fmt.Sprintf("%s-%d", d.Name, i), Spec: d.Spec.Template.Spec}
	c := pod.Spec.Containers[0]
	vars, err := testbed.ContainerEnv(objs, pod, c)
	if err != nil {
		t.Fatal(err)
	}
	// Its volumes (its NATS password, the servers' CA), the paths of its
	// variables rewritten.
	rewrite, err := testbed.MountVolumes(objs, pod, c, filepath.Join(dir, pod.Name))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range vars {
		vars[k] = rewrite(v)
	}
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
	for _, path := range testbed.ProbePaths(c) {
		probes = append(probes, "http://"+vars["UC_HEALTH_ADDR"]+path)
	}
	var scrapes []string
	switch {
	case !flags["metrics-addr"]:
	case vars["UC_METRICS_SECURE"] == "true":
		scrapes = append(scrapes, "https://"+vars["UC_METRICS_ADDR"]+"/metrics")
	default:
		probes = append(probes, "http://"+vars["UC_METRICS_ADDR"]+"/metrics")
	}
	return testbed.RunContainer(t, testbed.ContainerConfig{Name: pod.Name, Dir: dir, Bin: bin,
		Args: testbed.ExpandVars(c.Args, vars), Env: vars, Probes: probes, Scrapes: scrapes, ScrapeToken: scrapeToken, Logf: t.Logf})
}

// deployStartNATS runs the StatefulSet's NATS servers as the kubelet would
// (manifests.StartNATSServers): real nats-server processes from the
// shipped configuration, its volumes and init containers, a certificate
// of a test CA in the Secret uc-nats-tls, only the addresses replaced. As
// an administrator's overlay would, it adds the hook users of the
// controllers of hookPasswords: auth.conf made again by `uc nats-config`,
// and their passwords. It returns the client URLs, the CA file that
// verifies the servers (what a hook worker mounts), and the objects the
// Pods run from (the certificate among them).
func deployStartNATS(t *testing.T, m manifests.Set, dir string, hookPasswords map[string]string) (urls, caFile string, objs manifests.Objects) {
	t.Helper()
	authConf, err := exec.CommandContext(t.Context(), env.uc.bin, "nats-config",
		"--controllers", strings.Join(slices.Sorted(maps.Keys(hookPasswords)), ",")).Output()
	if err != nil {
		t.Fatalf("uc nats-config: %v", err)
	}
	sts := manifests.Typed[appsv1.StatefulSet](t, m.In(manifests.Namespace), "StatefulSet", "nats")
	objs = manifests.WithNATSTLS(t, m, sts)
	objs.AuthConf = string(authConf)
	objs.Passwords = map[string]string{}
	for ctl, pw := range hookPasswords {
		objs.Passwords[natsauth.PasswordVariable(natsauth.HookUser(ctl))] = pw
	}
	var clients []string
	servers := manifests.StartNATSServers(t, objs, sts, dir)
	for _, s := range servers {
		clients = append(clients, s.URL())
	}
	return strings.Join(clients, ","), filepath.Join(servers[0].Dir, "tls", "ca.crt"), objs
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
