package preflight

import (
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var configMapTarget = target{
	resource:   schema.GroupVersionResource{Version: "v1", Resource: "configmaps"},
	namespaced: true,
	ops:        []admissionv1.OperationType{admissionv1.Create},
	name:       "cm",
	namespace:  labels.Set{"team": "a"},
	objects:    []labelChoice{{fixed: map[string]string{"app": "x"}}},
}

func rule(groups, versions, resources []string, ops ...admissionv1.OperationType) admissionv1.RuleWithOperations {
	return admissionv1.RuleWithOperations{Operations: ops, Rule: admissionv1.Rule{APIGroups: groups, APIVersions: versions, Resources: resources}}
}

func TestRuleMatches(t *testing.T) {
	all, core, v1 := []string{"*"}, []string{""}, []string{"v1"}
	exact, cluster, namespaced := admissionv1.Exact, admissionv1.ClusterScope, admissionv1.NamespacedScope
	for _, tc := range []struct {
		name   string
		rule   admissionv1.RuleWithOperations
		policy *admissionv1.MatchPolicyType
		scope  *admissionv1.ScopeType
		want   bool
	}{
		{"every resource", rule(all, all, []string{"*"}, admissionv1.OperationAll), nil, nil, true},
		{"every resource and subresource", rule(all, all, []string{"*/*"}, admissionv1.Create), nil, nil, true},
		{"the resource", rule(core, v1, []string{"configmaps"}, admissionv1.Create), nil, nil, true},
		{"its subresources, which include it", rule(core, v1, []string{"configmaps/*"}, admissionv1.Create), nil, nil, true},
		{"one subresource", rule(core, v1, []string{"configmaps/status"}, admissionv1.Create), nil, nil, false},
		{"another resource", rule(core, v1, []string{"secrets"}, admissionv1.Create), nil, nil, false},
		{"another operation", rule(core, v1, []string{"configmaps"}, admissionv1.Update, admissionv1.Delete), nil, nil, false},
		{"a custom group", rule([]string{"example.com"}, all, []string{"*"}, admissionv1.Create), nil, nil, false},
		{"another built-in group, equivalent", rule([]string{"apps"}, v1, []string{"configmaps"}, admissionv1.Create), nil, nil, true},
		{"another built-in group, exact", rule([]string{"apps"}, v1, []string{"configmaps"}, admissionv1.Create), &exact, nil, false},
		{"another version, equivalent", rule(core, []string{"v2"}, []string{"configmaps"}, admissionv1.Create), nil, nil, true},
		{"another version, exact", rule(core, []string{"v2"}, []string{"configmaps"}, admissionv1.Create), &exact, nil, false},
		{"cluster scope", rule(all, all, []string{"*"}, admissionv1.Create), nil, &cluster, false},
		{"namespaced scope", rule(all, all, []string{"*"}, admissionv1.Create), nil, &namespaced, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.rule.Scope = tc.scope
			if got := configMapTarget.ruleMatches(tc.rule, tc.policy); got != tc.want {
				t.Fatalf("matches: %v, want %v", got, tc.want)
			}
		})
	}
}

func TestSelectorsMayMatch(t *testing.T) {
	sel := func(s string) *metav1.LabelSelector {
		ls, err := metav1.ParseToLabelSelector(s)
		if err != nil {
			t.Fatal(err)
		}
		return ls
	}
	apply := configMapTarget
	// The apply sets app=y over a live object labelled app=x, tier=web:
	// tier stays unless uc set it before.
	apply.objects = []labelChoice{{fixed: map[string]string{"app": "x", "tier": "web"}}, {fixed: map[string]string{"app": "y"}, optional: map[string]string{"app": "x", "tier": "web"}}}
	unknown := configMapTarget
	unknown.namespace, unknown.objects = nil, nil
	for _, tc := range []struct {
		name              string
		t                 target
		namespace, object *metav1.LabelSelector
		want              bool
	}{
		{"no selectors", configMapTarget, nil, nil, true},
		{"empty selectors", configMapTarget, &metav1.LabelSelector{}, &metav1.LabelSelector{}, true},
		{"namespace matches", configMapTarget, sel("team=a"), nil, true},
		{"namespace does not match", configMapTarget, sel("team=b"), nil, false},
		{"object matches", configMapTarget, nil, sel("app=x"), true},
		{"object does not match", configMapTarget, nil, sel("app in (y, z)"), false},
		{"object lacks the label", configMapTarget, nil, sel("!app"), false},
		{"the live object matches", apply, nil, sel("app=x"), true},
		{"the applied object matches", apply, nil, sel("app=y"), true},
		{"the applied object may keep a live label", apply, nil, sel("app=y,tier=web"), true},
		{"the applied object may drop a live label", apply, nil, sel("app=y,!tier"), true},
		{"neither matches", apply, nil, sel("app=z"), false},
		{"unknown namespace and object", unknown, sel("team=b"), sel("app=z"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.t.selectorsMayMatch(tc.namespace, tc.object); got != tc.want {
				t.Fatalf("may match: %v, want %v", got, tc.want)
			}
		})
	}
}

func TestResourcesMatch(t *testing.T) {
	named := func(names ...string) admissionv1.NamedRuleWithOperations {
		return admissionv1.NamedRuleWithOperations{ResourceNames: names, RuleWithOperations: rule([]string{""}, []string{"v1"}, []string{"configmaps"}, admissionv1.Create)}
	}
	for _, tc := range []struct {
		name string
		m    *admissionv1.MatchResources
		want bool
	}{
		{"none: the policy's", nil, true},
		{"selectors only: the policy's rules", &admissionv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{}}, true},
		{"a rule", &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{named()}}, true},
		{"a rule naming it", &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{named("cm")}}, true},
		{"a rule naming others", &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{named("other")}}, false},
		{"another namespace", &admissionv1.MatchResources{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "b"}},
			ResourceRules:     []admissionv1.NamedRuleWithOperations{named()},
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := configMapTarget.resourcesMatch(tc.m); got != tc.want {
				t.Fatalf("matches: %v, want %v", got, tc.want)
			}
		})
	}
}

func TestQuotaMayRefuse(t *testing.T) {
	one := resource.MustParse("1")
	update := configMapTarget
	update.ops = []admissionv1.OperationType{admissionv1.Update}
	pods := configMapTarget
	pods.resource.Resource = "pods"
	pods.ops = update.ops
	widgets := configMapTarget
	widgets.resource = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	for _, tc := range []struct {
		name string
		t    target
		hard corev1.ResourceList
		want bool
	}{
		{"no limits", configMapTarget, nil, false},
		{"a count of the resource", configMapTarget, corev1.ResourceList{"count/configmaps": one}, true},
		{"its legacy count", configMapTarget, corev1.ResourceList{"configmaps": one}, true},
		{"a count of another resource", configMapTarget, corev1.ResourceList{"count/secrets": one, "secrets": one}, false},
		{"compute", configMapTarget, corev1.ResourceList{"requests.cpu": one}, false},
		{"an update does not count", update, corev1.ResourceList{"count/configmaps": one}, false},
		{"a Pod's update may change its usage", pods, corev1.ResourceList{"requests.cpu": one}, true},
		{"a custom resource's count", widgets, corev1.ResourceList{"count/widgets.example.com": one}, true},
		{"a same-named core count", widgets, corev1.ResourceList{"count/widgets": one, "widgets": one}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.t.quotaMayRefuse(tc.hard); got != tc.want {
				t.Fatalf("may refuse: %v, want %v", got, tc.want)
			}
		})
	}
}
