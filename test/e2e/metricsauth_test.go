package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"universalcontroller.dev/uc/test/manifests"
	"universalcontroller.dev/uc/test/testbed"
)

// TestMetricsSecure runs uc with --metrics-secure as a ServiceAccount
// whose only rights are deploy/'s ClusterRole uc-metrics-auth, and scrapes
// its /metrics with real ServiceAccount tokens, which the test bed's API
// server authenticates (TokenReview) and authorizes (SubjectAccessReview,
// RBAC): no token or a forged one is 401, a ServiceAccount without RBAC
// 403, one bound to deploy/'s uc-metrics-reader 200 with uc's metrics, and
// only on /metrics; so does the token deploy/components/podmonitor's
// PodMonitor scrapes with. The probes on --health-addr stay plain and need
// no token.
func TestMetricsSecure(t *testing.T) {
	ctx := t.Context()
	ns := namespace(t)
	m, err := manifests.Kustomize(ctx, filepath.Join(env.root, "deploy"))
	if err != nil {
		t.Fatal(err)
	}
	// deploy/'s ClusterRoles, under this test's names: TestDeploy applies
	// and deletes deploy/'s own.
	auth := bindClusterRole(t, ns, "uc", manifests.Typed[rbacv1.ClusterRole](t, m.In(""), "ClusterRole", "uc-metrics-auth").Rules)
	reader := bindClusterRole(t, ns, "reader", manifests.Typed[rbacv1.ClusterRole](t, m.In(""), "ClusterRole", "uc-metrics-reader").Rules)
	createServiceAccount(t, ns, "nobody")
	eventually(t, 30*time.Second, func() error {
		return allowed(t, ns, "reader", &authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "get"}, nil)
	})
	eventually(t, 30*time.Second, func() error {
		return allowed(t, ns, "uc", nil, &authorizationv1.ResourceAttributes{Group: "authentication.k8s.io", Resource: "tokenreviews", Verb: "create"})
	})
	t.Logf("uc runs with the rules of ClusterRole %s only", auth)

	kubeconfig := filepath.Join(t.TempDir(), "uc.kubeconfig")
	if err := env.bed.ServiceAccountKubeconfig(ctx, ns, "uc", kubeconfig); err != nil {
		t.Fatal(err)
	}
	healthPort, err := testbed.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	healthAddr := fmt.Sprintf("127.0.0.1:%d", healthPort)
	// It serves no controller: only its metrics are of interest.
	secure, err := startUC(ctx, env.uc.bin, kubeconfig, filepath.Join(t.TempDir(), "secure"),
		"--metrics-secure", "--health-addr", healthAddr, "--controller-selector", installLabel+"=metrics-secure")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(secure.stop)
	metricsURL := "https://" + secure.metricsAddr

	scraper := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, // uc's self-signed certificate
	}}
	get := func(url, token string) (int, string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return 0, "", err
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := scraper.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), err
	}
	wantStatus := func(t *testing.T, url, token string, want int) string {
		t.Helper()
		var body string
		eventually(t, 30*time.Second, func() error {
			code, b, err := get(url, token)
			if err != nil {
				return err
			}
			body = b
			if code != want {
				return fmt.Errorf("GET %s: %d %q, want %d", url, code, firstLine(b), want)
			}
			return nil
		})
		return body
	}
	token := func(sa string) string { return serviceAccountToken(t, ns, sa) }

	t.Run("no token: 401", func(t *testing.T) { wantStatus(t, metricsURL+"/metrics", "", http.StatusUnauthorized) })
	t.Run("a forged token: 401", func(t *testing.T) {
		wantStatus(t, metricsURL+"/metrics", "eyJhbGciOiJSUzI1NiJ9.e30.c2lnbmF0dXJl", http.StatusUnauthorized)
	})
	t.Run("a ServiceAccount without RBAC: 403", func(t *testing.T) {
		wantStatus(t, metricsURL+"/metrics", token("nobody"), http.StatusForbidden)
	})
	readerToken := token("reader")
	t.Run("a ServiceAccount bound to uc-metrics-reader: 200, uc's metrics", func(t *testing.T) {
		body := wantStatus(t, metricsURL+"/metrics", readerToken, http.StatusOK)
		for _, want := range []string{"uc_panics_total", "go_goroutines", "process_cpu_seconds_total"} {
			if !strings.Contains(body, want) {
				t.Errorf("/metrics lacks %s", want)
			}
		}
	})
	t.Run("uc-metrics-reader is for /metrics only: 403 elsewhere", func(t *testing.T) {
		wantStatus(t, metricsURL+"/debug/pprof/", readerToken, http.StatusForbidden)
	})
	t.Run("plain HTTP is not served", func(t *testing.T) {
		if code, _, err := get("http://"+secure.metricsAddr+"/metrics", readerToken); err == nil && code == http.StatusOK {
			t.Errorf("GET http://%s/metrics: 200, want a refusal", secure.metricsAddr)
		}
	})
	t.Run("the token deploy/components/podmonitor scrapes with: 200", func(t *testing.T) {
		// Its ServiceAccount and token Secret, in this test's namespace,
		// bound to this test's uc-metrics-reader.
		comp, err := manifests.Read(filepath.Join(env.root, "deploy/components/podmonitor/podmonitor.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		sc := manifests.CheckPodMonitorAuth(t, comp, comp.Find("PodMonitor", "uc"), "uc-metrics-reader")
		createServiceAccount(t, ns, sc.ServiceAccount)
		secret := manifests.Typed[corev1.Secret](t, comp, "Secret", sc.TokenSecret)
		secret.Namespace = ns
		if _, err := env.kube.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		bindServiceAccount(t, ns+"-podmonitor", reader, ns, sc.ServiceAccount)
		eventually(t, 30*time.Second, func() error {
			return allowed(t, ns, sc.ServiceAccount, &authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "get"}, nil)
		})
		var tok string
		eventually(t, 30*time.Second, func() error { // the controller manager fills it in
			s, err := env.kube.CoreV1().Secrets(ns).Get(ctx, sc.TokenSecret, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if tok = string(s.Data[corev1.ServiceAccountTokenKey]); tok == "" {
				return fmt.Errorf("secret %s has no token yet", sc.TokenSecret)
			}
			return nil
		})
		wantStatus(t, metricsURL+"/metrics", tok, http.StatusOK)
	})
	t.Run("the probes need no token", func(t *testing.T) {
		wantStatus(t, "http://"+healthAddr+"/healthz", "", http.StatusOK)
	})
}

// createServiceAccount creates the ServiceAccount ns/name.
func createServiceAccount(t *testing.T, ns, name string) {
	t.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	if _, err := env.kube.CoreV1().ServiceAccounts(ns).Create(t.Context(), sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// bindClusterRole creates the ServiceAccount ns/name and binds it to a
// ClusterRole of rules, named after both, until the test ends; it returns
// the ClusterRole's name.
func bindClusterRole(t *testing.T, ns, name string, rules []rbacv1.PolicyRule) string {
	t.Helper()
	createServiceAccount(t, ns, name)
	role := ns + "-" + name
	roles := env.kube.RbacV1().ClusterRoles()
	if _, err := roles.Create(t.Context(), &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: role}, Rules: rules}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = roles.Delete(context.Background(), role, metav1.DeleteOptions{}) })
	bindServiceAccount(t, role, role, ns, name)
	return role
}

// bindServiceAccount binds the ServiceAccount ns/sa to the ClusterRole
// role, with the ClusterRoleBinding name, until the test ends.
func bindServiceAccount(t *testing.T, name, role, ns, sa string) {
	t.Helper()
	bindings := env.kube.RbacV1().ClusterRoleBindings()
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: ns}}}
	if _, err := bindings.Create(t.Context(), binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bindings.Delete(context.Background(), name, metav1.DeleteOptions{}) })
}

// serviceAccountToken is a token of the ServiceAccount ns/sa (TokenRequest).
func serviceAccountToken(t *testing.T, ns, sa string) string {
	t.Helper()
	tr, err := env.kube.CoreV1().ServiceAccounts(ns).CreateToken(t.Context(), sa, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token of ServiceAccount %s/%s: %v", ns, sa, err)
	}
	return tr.Status.Token
}

// allowed returns nil once the API server allows the ServiceAccount ns/sa
// the non-resource or resource access.
func allowed(t *testing.T, ns, sa string, nonResource *authorizationv1.NonResourceAttributes, resource *authorizationv1.ResourceAttributes) error {
	user := "system:serviceaccount:" + ns + ":" + sa
	review, err := env.kube.AuthorizationV1().SubjectAccessReviews().Create(t.Context(), &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{User: user, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns},
			NonResourceAttributes: nonResource, ResourceAttributes: resource}}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	if !review.Status.Allowed {
		return fmt.Errorf("%s is not allowed yet: %s", user, review.Status.Reason)
	}
	return nil
}

// firstLine is the first line of s.
func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// scraperToken is a token of a new ServiceAccount in ns bound to the
// ClusterRole reader until the test ends, once the API server allows it
// to get /metrics.
func scraperToken(t *testing.T, ns, reader string) string {
	t.Helper()
	const name = "e2e-metrics-scraper"
	createServiceAccount(t, ns, name)
	t.Cleanup(func() {
		_ = env.kube.CoreV1().ServiceAccounts(ns).Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	bindServiceAccount(t, name, reader, ns, name)
	eventually(t, 30*time.Second, func() error {
		return allowed(t, ns, name, &authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "get"}, nil)
	})
	return serviceAccountToken(t, ns, name)
}
