package helmchart

import (
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/strvals"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"universalcontroller.dev/uc/test/manifests"
)

// setValues is the values of `helm install --set s…`.
func setValues(t *testing.T, sets ...string) map[string]any {
	t.Helper()
	vals := map[string]any{}
	for _, s := range sets {
		if err := strvals.ParseInto(s, vals); err != nil {
			t.Fatalf("--set %s: %v", s, err)
		}
	}
	return vals
}

// setJSONValues is the values of `helm install --set-json s…`.
func setJSONValues(t *testing.T, sets ...string) map[string]any {
	t.Helper()
	vals := map[string]any{}
	for _, s := range sets {
		if err := strvals.ParseJSON(s, vals); err != nil {
			t.Fatalf("--set-json %s: %v", s, err)
		}
	}
	return vals
}

// convention is a value the conventions of official charts (Metacontroller's,
// NATS', Knative's) call for, and what it must change in the render.
type convention struct {
	name  string
	vals  map[string]any
	check func(*testing.T, manifests.Set)
}

// TestConventions renders the chart with each value of the conventions and
// checks that it takes effect, and that the render still holds together
// (consistent).
func TestConventions(t *testing.T) {
	for _, tc := range conventions(t) {
		t.Run(tc.name, func(t *testing.T) {
			m := render(t, release, tc.vals)
			consistent(t, m)
			tc.check(t, m)
		})
	}
}

func conventions(t *testing.T) []convention {
	return []convention{
		{"nameOverride", setValues(t, "nameOverride=ctl", "metrics.podMonitor.enabled=true"), func(t *testing.T, m manifests.Set) {
			named(t, m, "uc-ctl-")
			for _, role := range manifests.Roles {
				d := manifests.Typed[appsv1.Deployment](t, m, "Deployment", "uc-ctl-"+role)
				if got := d.Spec.Template.Labels["app.kubernetes.io/name"]; got != "ctl" {
					t.Errorf("uc-ctl-%s's Pods are labelled app.kubernetes.io/name=%s, want ctl", role, got)
				}
			}
			selector, _, _ := unstructured.NestedStringMap(m.Find("PodMonitor", "uc-ctl").Object, "spec", "selector", "matchLabels")
			if selector["app.kubernetes.io/name"] != "ctl" {
				t.Errorf("the PodMonitor selects %v, not the renamed Pods", selector)
			}
		}},
		{"fullnameOverride", setValues(t, "fullnameOverride=payments"), func(t *testing.T, m manifests.Set) {
			named(t, m, "payments-")
			if got := manifests.Typed[corev1.ConfigMap](t, m, "ConfigMap", "payments-config").Data["UC_NATS_URL"]; got != "nats://payments-nats:4222" {
				t.Errorf("UC_NATS_URL=%s, want the renamed NATS", got)
			}
		}},
		{"namespaceOverride", setValues(t, "namespaceOverride=other"), func(t *testing.T, m manifests.Set) {
			for _, o := range m {
				if isNamespaced(o) && o.GetNamespace() != "other" {
					t.Errorf("%s %s is in namespace %q, want other", o.GetKind(), o.GetName(), o.GetNamespace())
				}
			}
			for _, s := range subjects(t, m) {
				if s.Namespace != "other" {
					t.Errorf("a binding names ServiceAccount %s/%s, want it in other", s.Namespace, s.Name)
				}
			}
		}},
		{"serviceAccount name and annotations", setValues(t, "serviceAccount.name=team-uc", "serviceAccount.annotations.iam\\.example\\.com/role=uc"), func(t *testing.T, m manifests.Set) {
			for _, role := range manifests.Roles {
				want := "team-uc-" + role
				if got := manifests.Typed[appsv1.Deployment](t, m, "Deployment", "uc-"+role).Spec.Template.Spec.ServiceAccountName; got != want {
					t.Errorf("uc-%s runs as %s, want %s", role, got, want)
				}
				if sa := manifests.Typed[corev1.ServiceAccount](t, m, "ServiceAccount", want); sa.Annotations["iam.example.com/role"] != "uc" {
					t.Errorf("ServiceAccount %s: annotations %v", want, sa.Annotations)
				}
			}
		}},
		{"serviceAccount.create false", setValues(t, "serviceAccount.create=false", "serviceAccount.name=mine"), func(t *testing.T, m manifests.Set) {
			if sas := m.OfKind("ServiceAccount"); len(sas) != 0 {
				t.Errorf("serviceAccount.create=false, the chart makes %d ServiceAccounts", len(sas))
			}
			for _, s := range subjects(t, m) {
				if !strings.HasPrefix(s.Name, "mine-") {
					t.Errorf("a binding names ServiceAccount %s, not one of the user's (mine-<role>)", s.Name)
				}
			}
		}},
		{"rbac.create false", setValues(t, "rbac.create=false", "metacontrollerAPI=true", "dispatcher.webhookCredentialNamespaces={hooks}"), func(t *testing.T, m manifests.Set) {
			for _, kind := range []string{"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"} {
				if got := m.OfKind(kind); len(got) != 0 {
					t.Errorf("rbac.create=false, the chart makes %d %ss", len(got), kind)
				}
			}
			if len(m.OfKind("ServiceAccount")) != 3 {
				t.Error("rbac.create=false removed the ServiceAccounts")
			}
		}},
	}
}

// named checks that every object but the CRDs is named with prefix (or
// is the prefix, without its "-").
func named(t *testing.T, m manifests.Set, prefix string) {
	t.Helper()
	for _, o := range m {
		if o.GetKind() != "CustomResourceDefinition" && !strings.HasPrefix(o.GetName(), prefix) && o.GetName() != strings.TrimSuffix(prefix, "-") {
			t.Errorf("%s %s is not named %s…", o.GetKind(), o.GetName(), prefix)
		}
	}
}

// isNamespaced says whether the chart's object of that kind is namespaced.
func isNamespaced(o *unstructured.Unstructured) bool {
	switch o.GetKind() {
	case "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding":
		return false
	case "RoleBinding":
		return !strings.HasSuffix(o.GetName(), "-webhook-credentials") // in dispatcher.webhookCredentialNamespaces
	}
	return true
}

// subjects are the ServiceAccounts the chart's bindings name.
func subjects(t *testing.T, m manifests.Set) []rbacv1.Subject {
	t.Helper()
	var out []rbacv1.Subject
	for _, o := range m {
		switch o.GetKind() {
		case "ClusterRoleBinding":
			out = append(out, manifests.Typed[rbacv1.ClusterRoleBinding](t, manifests.Set{o}, o.GetKind(), o.GetName()).Subjects...)
		case "RoleBinding":
			out = append(out, manifests.Typed[rbacv1.RoleBinding](t, manifests.Set{o}, o.GetKind(), o.GetName()).Subjects...)
		}
	}
	return out
}

// consistent checks what holds whatever the values: workloads select their
// own Pods, PodDisruptionBudgets select a workload's Pods, the Pods run as
// ServiceAccounts the chart makes (when it makes them), and bindings name
// them.
func consistent(t *testing.T, m manifests.Set) {
	t.Helper()
	var pods []map[string]string
	var accounts []string
	for _, o := range m {
		var selector, labels map[string]string
		var sa string
		switch o.GetKind() {
		case "Deployment":
			d := manifests.Typed[appsv1.Deployment](t, manifests.Set{o}, o.GetKind(), o.GetName())
			selector, labels, sa = d.Spec.Selector.MatchLabels, d.Spec.Template.Labels, d.Spec.Template.Spec.ServiceAccountName
		case "StatefulSet":
			s := manifests.Typed[appsv1.StatefulSet](t, manifests.Set{o}, o.GetKind(), o.GetName())
			selector, labels = s.Spec.Selector.MatchLabels, s.Spec.Template.Labels
		default:
			continue
		}
		if !matches(selector, labels) {
			t.Errorf("%s %s selects %v, its Pods are labelled %v", o.GetKind(), o.GetName(), selector, labels)
		}
		pods = append(pods, labels)
		if sa != "" {
			accounts = append(accounts, sa)
		}
	}
	for _, o := range m.OfKind("PodDisruptionBudget") {
		pdb := manifests.Typed[policyv1.PodDisruptionBudget](t, manifests.Set{o}, o.GetKind(), o.GetName())
		if !slices.ContainsFunc(pods, func(l map[string]string) bool { return matches(pdb.Spec.Selector.MatchLabels, l) }) {
			t.Errorf("PodDisruptionBudget %s selects no Pods of the chart (%v)", pdb.Name, pdb.Spec.Selector.MatchLabels)
		}
	}
	if len(m.OfKind("ServiceAccount")) > 0 {
		for _, sa := range accounts {
			if m.Find("ServiceAccount", sa) == nil {
				t.Errorf("Pods run as ServiceAccount %s, which the chart does not make", sa)
			}
		}
	}
	for _, s := range subjects(t, m) {
		if !slices.Contains(accounts, s.Name) {
			t.Errorf("a binding names ServiceAccount %s, which no Pod runs as", s.Name)
		}
	}
}
