package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"universalcontroller.dev/uc/schemas/v1alpha1"
	"universalcontroller.dev/uc/test/testbed"
)

// httpGet returns the status code and body of GET url.
func httpGet(ctx context.Context, url string) (int, string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// expectHTTP is a check that GET url answers code with a body containing
// every one of want.
func expectHTTP(ctx context.Context, url string, code int, want ...string) func() error {
	return func() error {
		got, body, err := httpGet(ctx, url)
		if err != nil {
			return err
		}
		if got != code {
			return fmt.Errorf("GET %s: %d, want %d: %s", url, got, code, body)
		}
		for _, w := range want {
			if !strings.Contains(body, w) {
				return fmt.Errorf("GET %s: body lacks %q: %s", url, w, body)
			}
		}
		return nil
	}
}

// TestReadiness follows an applier's /readyz: alive but not ready while
// the streams it consumes do not exist (no dispatcher yet), ready once
// they and its buckets exist and its caches are filled, not ready while
// NATS is down, ready again after. Its /metrics is served all along.
func TestReadiness(t *testing.T) {
	ctx := t.Context()
	srv, err := testbed.StartNATS(ctx, filepath.Join(t.TempDir(), "nats"), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	b := &rolesOnBus{t: t, ns: namespace(t), dir: t.TempDir(),
		args: []string{"--kubeconfig", env.bed.Kubeconfig(), "--nats-url", srv.URL(), "--log-level", "debug"}}
	ports := make([]int, 2)
	for i := range ports {
		if ports[i], err = testbed.FreePort(); err != nil {
			t.Fatal(err)
		}
	}
	health, metrics := fmt.Sprintf("http://127.0.0.1:%d", ports[0]), fmt.Sprintf("http://127.0.0.1:%d/metrics", ports[1])
	b.start("applier", "applier", "--health-addr", fmt.Sprintf("127.0.0.1:%d", ports[0]), "--metrics-addr", fmt.Sprintf("127.0.0.1:%d", ports[1]))

	eventually(t, 30*time.Second, expectHTTP(ctx, health+"/healthz", http.StatusOK))
	eventually(t, 30*time.Second, expectHTTP(ctx, health+"/readyz", http.StatusServiceUnavailable, "streams: UC_REPLIES", "stream not found"))
	eventually(t, 30*time.Second, expectHTTP(ctx, metrics, http.StatusOK, "go_goroutines"))

	b.start("dispatcher", "dispatcher")
	start := time.Now()
	eventually(t, time.Minute, expectHTTP(ctx, health+"/readyz", http.StatusOK))
	t.Logf("the applier was ready %s after the dispatcher started", time.Since(start).Round(10*time.Millisecond))
	eventually(t, 30*time.Second, expectHTTP(ctx, metrics, http.StatusOK, `workqueue_depth{name="replies"}`))

	srv.Stop()
	eventually(t, 30*time.Second, expectHTTP(ctx, health+"/readyz", http.StatusServiceUnavailable, "nats: not connected"))
	eventually(t, 30*time.Second, expectHTTP(ctx, health+"/healthz", http.StatusOK))
	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, expectHTTP(ctx, health+"/readyz", http.StatusOK))
}

// TestMissingPermission registers a controller whose child kind (Secrets)
// the dispatcher's ServiceAccount may not list. The UniversalController's
// Ready condition and a Warning Event name the missing permission within
// seconds, not after a minute of waiting for caches.
func TestMissingPermission(t *testing.T) {
	ctx := t.Context()
	ns := namespace(t)
	const name = "e2e-missing-rbac"
	// The dispatcher may report on UniversalControllers and read every
	// kind but Secrets: the other controllers registered on the test bed
	// run, and only this one lacks a permission.
	rules := append(readAllBut(t, "secrets"),
		rbacv1.PolicyRule{APIGroups: []string{v1alpha1.Group}, Resources: []string{"universalcontrollers/status"}, Verbs: []string{"get", "patch", "update"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch", "update"}},
	)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "uc", Namespace: ns}}
	if _, err := env.kube.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa.Name, Namespace: ns}}}
	if _, err := env.kube.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.kube.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		bg := context.Background()
		_ = env.kube.RbacV1().ClusterRoleBindings().Delete(bg, name, metav1.DeleteOptions{})
		_ = env.kube.RbacV1().ClusterRoles().Delete(bg, name, metav1.DeleteOptions{})
		_ = env.dyn.Resource(v1alpha1.Resource).Delete(bg, name, metav1.DeleteOptions{})
	})
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := env.bed.ServiceAccountKubeconfig(ctx, ns, sa.Name, kubeconfig); err != nil {
		t.Fatal(err)
	}

	srv, err := testbed.StartNATS(ctx, filepath.Join(t.TempDir(), "nats"), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	b := &rolesOnBus{t: t, ns: ns, dir: t.TempDir(),
		args: []string{"--kubeconfig", kubeconfig, "--nats-url", srv.URL(), "--log-level", "debug"}}
	d := b.start("dispatcher", "dispatcher")
	eventually(t, 30*time.Second, func() error {
		if !d.logHas("uc started") {
			return fmt.Errorf("the dispatcher has not started")
		}
		return nil
	})

	if !t.Run("the missing permission is reported within seconds", func(t *testing.T) {
		// Namespaces own Secrets; the selector matches no namespace, so the
		// test bed's own uc (which may list Secrets) has nothing to do.
		ctl := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": v1alpha1.Group + "/" + v1alpha1.Version, "kind": "UniversalController",
			"metadata": map[string]any{"name": name},
			"spec": map[string]any{
				"parentResource": map[string]any{"apiVersion": "v1", "resource": "namespaces",
					"labelSelector": map[string]any{"matchLabels": map[string]any{"e2e.universalcontroller.dev/" + name: "none"}}},
				"childResources": []any{map[string]any{"apiVersion": "v1", "resource": "secrets"}},
				"hooks":          map[string]any{"sync": map[string]any{}},
			},
		}}
		created := time.Now()
		if _, err := env.dyn.Resource(v1alpha1.Resource).Create(ctx, ctl, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		const want = "cannot list secrets in the cluster: forbidden (uc's ServiceAccount needs list and watch on secrets)"
		eventually(t, 30*time.Second, func() error {
			evs, err := env.kube.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
			if err != nil {
				return err
			}
			if !slices.ContainsFunc(evs.Items, func(e corev1.Event) bool {
				return e.Type == corev1.EventTypeWarning && e.Reason == "CannotRun" && strings.Contains(e.Message, want)
			}) {
				return fmt.Errorf("no Warning Event CannotRun naming the permission (%d Events)", len(evs.Items))
			}
			u, err := env.dyn.Resource(v1alpha1.Resource).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			var uc v1alpha1.UniversalController
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &uc); err != nil {
				return err
			}
			c := meta.FindStatusCondition(uc.Status.Conditions, "Ready")
			if c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, want) {
				return fmt.Errorf("Ready condition %+v does not name the permission", c)
			}
			t.Logf("Ready=False: %s", c.Message)
			return nil
		})
		if took := time.Since(created); took > 20*time.Second {
			t.Errorf("the missing permission was reported %s after the controller's creation; want seconds", took)
		} else {
			t.Logf("the missing permission was reported %s after the controller's creation", took.Round(10*time.Millisecond))
		}
	}) {
		return
	}

	t.Run("given the permission, the controller starts within seconds", func(t *testing.T) {
		role.Rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "watch"}})
		if _, err := env.kube.RbacV1().ClusterRoles().Update(ctx, role, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		granted := time.Now()
		eventually(t, 30*time.Second, func() error {
			if !d.logHas(`msg="controller registered" component=registry controller=` + name) {
				return fmt.Errorf("the dispatcher has not registered %s", name)
			}
			return nil
		})
		t.Logf("the controller started %s after its permission was granted", time.Since(granted).Round(10*time.Millisecond))
	})
}

// readAllBut allows get, list and watch on every listable kind of the test
// bed except the core resource named.
func readAllBut(t *testing.T, except string) []rbacv1.PolicyRule {
	t.Helper()
	lists, err := env.kube.Discovery().ServerPreferredResources()
	if err != nil {
		t.Fatal(err)
	}
	var rules []rbacv1.PolicyRule
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range l.APIResources {
			if !slices.Contains(r.Verbs, "list") || (gv.Group == "" && r.Name == except) {
				continue
			}
			rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{gv.Group}, Resources: []string{r.Name}, Verbs: []string{"get", "list", "watch"}})
		}
	}
	return rules
}
