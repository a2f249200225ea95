package manifests

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// CheckSecureMetrics checks the secure metrics of an install whose objects
// are named <prefix>-…: every role's Deployment serves /metrics with
// UC_METRICS_SECURE=true on its port "metrics", and its Pods say https to
// annotation-based scrapers; a ClusterRole aggregated into every role's
// lets it create the TokenReviews and SubjectAccessReviews; and the
// ClusterRole <prefix>-metrics-reader allows get on /metrics, nothing more.
func CheckSecureMetrics(t testing.TB, s Set, prefix string) {
	t.Helper()
	for _, role := range Roles {
		d := Typed[appsv1.Deployment](t, s, "Deployment", prefix+"-"+role)
		c := d.Spec.Template.Spec.Containers[0]
		if !slices.Contains(c.Env, corev1.EnvVar{Name: "UC_METRICS_SECURE", Value: "true"}) {
			t.Errorf("%s: no UC_METRICS_SECURE=true among %v", d.Name, c.Env)
		}
		if !slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == "metrics" }) {
			t.Errorf("%s: no port metrics", d.Name)
		}
		if got := d.Spec.Template.Annotations["prometheus.io/scheme"]; got != "https" {
			t.Errorf("%s: prometheus.io/scheme %q, want https", d.Name, got)
		}
		var reviews []string
		for _, o := range s.OfKind("ClusterRole") {
			if o.GetLabels()[AggregateLabel+role] != "true" {
				continue
			}
			for _, r := range Typed[rbacv1.ClusterRole](t, Set{o}, "ClusterRole", o.GetName()).Rules {
				if slices.Contains(r.Verbs, "create") && (slices.Equal(r.APIGroups, []string{"authentication.k8s.io"}) || slices.Equal(r.APIGroups, []string{"authorization.k8s.io"})) {
					reviews = append(reviews, r.Resources...)
				}
			}
		}
		if !slices.Contains(reviews, "tokenreviews") || !slices.Contains(reviews, "subjectaccessreviews") {
			t.Errorf("the ClusterRoles aggregated into %s's let it create %q; want subjectaccessreviews and tokenreviews", role, reviews)
		}
	}
	reader := Typed[rbacv1.ClusterRole](t, s, "ClusterRole", prefix+"-metrics-reader")
	if want := []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}; !slices.EqualFunc(reader.Rules, want, func(a, b rbacv1.PolicyRule) bool {
		return slices.Equal(a.NonResourceURLs, b.NonResourceURLs) && slices.Equal(a.Verbs, b.Verbs) && len(a.Resources) == 0 && len(a.APIGroups) == 0
	}) {
		t.Errorf("ClusterRole %s: rules %v, want get on /metrics only", reader.Name, reader.Rules)
	}
}

// MetricsScraper is who a PodMonitor scrapes secure metrics as: the
// ServiceAccount whose token Secret its endpoint names.
type MetricsScraper struct {
	Namespace, ServiceAccount, TokenSecret string
}

// CheckPodMonitorAuth checks that the PodMonitor pm scrapes over HTTPS
// with the token of a service-account-token Secret of s, skipping the
// verification of the roles' self-signed certificates, and that a
// ClusterRoleBinding of s binds that ServiceAccount to readerRole. It
// returns the scraper.
func CheckPodMonitorAuth(t testing.TB, s Set, pm *unstructured.Unstructured, readerRole string) MetricsScraper {
	t.Helper()
	endpoints, _, _ := unstructured.NestedSlice(pm.Object, "spec", "podMetricsEndpoints")
	if len(endpoints) != 1 {
		t.Fatalf("PodMonitor %s: %d endpoints, want 1", pm.GetName(), len(endpoints))
	}
	ep := endpoints[0].(map[string]any)
	scheme, _, _ := unstructured.NestedString(ep, "scheme")
	authType, _, _ := unstructured.NestedString(ep, "authorization", "type")
	secret, _, _ := unstructured.NestedString(ep, "authorization", "credentials", "name")
	key, _, _ := unstructured.NestedString(ep, "authorization", "credentials", "key")
	skip, _, _ := unstructured.NestedBool(ep, "tlsConfig", "insecureSkipVerify")
	if scheme != "https" || authType != "Bearer" || key != "token" || !skip {
		t.Errorf("PodMonitor %s: scheme %q, authorization %q from key %q, insecureSkipVerify %t; want https, Bearer from the key token, true", pm.GetName(), scheme, authType, key, skip)
	}
	sc := MetricsScraper{Namespace: pm.GetNamespace(), TokenSecret: secret}
	tok := s.In(pm.GetNamespace()).Find("Secret", secret)
	if tok == nil {
		t.Errorf("PodMonitor %s takes its token from Secret %s/%s, which is not there", pm.GetName(), pm.GetNamespace(), secret)
		return sc
	}
	sec := Typed[corev1.Secret](t, Set{tok}, "Secret", secret)
	sc.ServiceAccount = sec.Annotations[corev1.ServiceAccountNameKey]
	if sec.Type != corev1.SecretTypeServiceAccountToken || s.In(pm.GetNamespace()).Find("ServiceAccount", sc.ServiceAccount) == nil {
		t.Errorf("Secret %s: type %s of ServiceAccount %q; want a service-account-token of a ServiceAccount of the install", secret, sec.Type, sc.ServiceAccount)
	}
	bound := slices.ContainsFunc(s.OfKind("ClusterRoleBinding"), func(o *unstructured.Unstructured) bool {
		b := Typed[rbacv1.ClusterRoleBinding](t, Set{o}, "ClusterRoleBinding", o.GetName())
		return b.RoleRef.Kind == "ClusterRole" && b.RoleRef.Name == readerRole && slices.Contains(b.Subjects,
			rbacv1.Subject{Kind: "ServiceAccount", Name: sc.ServiceAccount, Namespace: pm.GetNamespace()})
	})
	if !bound {
		t.Errorf("no ClusterRoleBinding binds ServiceAccount %s/%s to %s", pm.GetNamespace(), sc.ServiceAccount, readerRole)
	}
	return sc
}
