package preflight

import (
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// target is what the apiserver's admission matches a write on, as far as
// uc knows it. Each decision below answers "may this apply to the write?":
// where uc cannot tell, the answer is yes.
type target struct {
	resource   schema.GroupVersionResource
	namespaced bool
	ops        []admissionv1.OperationType
	name       string
	// namespace holds the labels of the object's namespace; nil when they
	// are unknown, or for a cluster-scoped object (which every namespace
	// selector matches).
	namespace labels.Set
	// objects are the label sets the object may have before and after the
	// write: an object selector matches the write when it may match one.
	// nil when they are unknown: every object selector matches.
	objects []labelChoice
}

// labelChoice is the labels of an object, where some are not known for
// sure: fixed ones it has, optional ones it may have or not. A server-side
// apply keeps the labels it does not set unless uc set them before, which
// uc cannot tell.
type labelChoice struct{ fixed, optional map[string]string }

// mayMatch tells whether sel may match the labels: each of its
// requirements is met by some choice of the optional labels. (Two
// requirements on one key are judged apart, so this errs towards yes.)
func (c labelChoice) mayMatch(sel labels.Selector) bool {
	reqs, _ := sel.Requirements()
	for _, r := range reqs {
		key := r.Key()
		candidates := []labels.Set{{}} // the label absent
		if v, ok := c.fixed[key]; ok {
			candidates = []labels.Set{{key: v}}
		} else if v, ok := c.optional[key]; ok {
			candidates = append(candidates, labels.Set{key: v})
		}
		if !slices.ContainsFunc(candidates, func(s labels.Set) bool { return r.Matches(s) }) {
			return false
		}
	}
	return true
}

// selectorsMayMatch tells whether a namespace selector and an object
// selector may both match the write. A nil selector, like an empty one,
// matches everything; one the apiserver could not parse is taken as
// matching.
func (t target) selectorsMayMatch(namespace, object *metav1.LabelSelector) bool {
	if sel, ok := selector(namespace); ok && t.namespace != nil && !sel.Matches(t.namespace) {
		return false
	}
	sel, ok := selector(object)
	return !ok || t.objects == nil || slices.ContainsFunc(t.objects, func(c labelChoice) bool { return c.mayMatch(sel) })
}

// selector converts a label selector; ok is false for one that matches
// everything, or that does not convert.
func selector(s *metav1.LabelSelector) (labels.Selector, bool) {
	if s == nil {
		return nil, false
	}
	sel, err := metav1.LabelSelectorAsSelector(s)
	if err != nil || sel.Empty() {
		return nil, false
	}
	return sel, true
}

// ruleMatches tells whether an admission rule may apply to the write: one
// of its operations, its resource (not a subresource), its scope, and its
// group and version. Under the Equivalent match policy (the default) the
// apiserver also applies a rule to the same resource served in other
// versions, and, for a few built-in resources, in other groups (Events in
// "" and events.k8s.io): then the version does not count, nor the group
// between built-in groups.
func (t target) ruleMatches(r admissionv1.RuleWithOperations, policy *admissionv1.MatchPolicyType) bool {
	exact := policy != nil && *policy == admissionv1.Exact
	return slices.ContainsFunc(t.ops, func(op admissionv1.OperationType) bool {
		return slices.Contains(r.Operations, op) || slices.Contains(r.Operations, admissionv1.OperationAll)
	}) &&
		t.scopeMatches(r.Scope) &&
		(wildcardOr(r.APIGroups, t.resource.Group) || !exact && builtInGroup(t.resource.Group) && slices.ContainsFunc(r.APIGroups, builtInGroup)) &&
		(!exact || wildcardOr(r.APIVersions, t.resource.Version)) &&
		slices.ContainsFunc(r.Resources, func(entry string) bool {
			res, sub, _ := strings.Cut(entry, "/")
			return (res == "*" || res == t.resource.Resource) && (sub == "" || sub == "*")
		})
}

// namedRuleMatches is ruleMatches, for the object's name too.
func (t target) namedRuleMatches(r admissionv1.NamedRuleWithOperations, policy *admissionv1.MatchPolicyType) bool {
	return t.ruleMatches(r.RuleWithOperations, policy) && (len(r.ResourceNames) == 0 || slices.Contains(r.ResourceNames, t.name))
}

// resourcesMatch tells whether a ValidatingAdmissionPolicy's or binding's
// match resources may select the write. A binding without them, or
// without resource rules, takes the policy's. Exclusions are left out:
// they only make a policy apply to fewer writes.
func (t target) resourcesMatch(m *admissionv1.MatchResources) bool {
	if m == nil {
		return true
	}
	return t.selectorsMayMatch(m.NamespaceSelector, m.ObjectSelector) && (len(m.ResourceRules) == 0 ||
		slices.ContainsFunc(m.ResourceRules, func(r admissionv1.NamedRuleWithOperations) bool { return t.namedRuleMatches(r, m.MatchPolicy) }))
}

// webhookMayApply tells whether an admission webhook may be called for the
// write, and so may refuse it (whatever its failure policy: that is for
// when it cannot be called). Its match conditions are CEL, left to the
// apiserver: they only make a webhook apply to fewer writes.
func (t target) webhookMayApply(rules []admissionv1.RuleWithOperations, policy *admissionv1.MatchPolicyType, namespace, object *metav1.LabelSelector) bool {
	return t.selectorsMayMatch(namespace, object) &&
		slices.ContainsFunc(rules, func(r admissionv1.RuleWithOperations) bool { return t.ruleMatches(r, policy) })
}

func (t target) scopeMatches(scope *admissionv1.ScopeType) bool {
	if scope == nil || *scope == admissionv1.AllScopes {
		return true
	}
	// A Namespace is cluster-scoped to admission.
	namespaced := t.namespaced && t.resource.GroupResource() != (schema.GroupResource{Resource: "namespaces"})
	return namespaced == (*scope == admissionv1.NamespacedScope)
}

func wildcardOr(items []string, s string) bool {
	return slices.Contains(items, "*") || slices.Contains(items, s)
}

// builtInGroup tells the groups of Kubernetes' own resources: a custom
// resource's group has a dot and is not under k8s.io.
func builtInGroup(group string) bool {
	return !strings.Contains(group, ".") || strings.HasSuffix(group, ".k8s.io")
}

// quotaMayRefuse tells whether a ResourceQuota with these hard limits may
// refuse the write. Creating an object counts against "count/<resource>"
// (and a core resource's legacy name, "configmaps"); only Pods, Services
// and PersistentVolumeClaims have usage beyond their count (CPU, memory,
// storage, load balancers), which an update may change too.
func (t target) quotaMayRefuse(hard corev1.ResourceList) bool {
	gr := t.resource.GroupResource()
	creates := slices.Contains(t.ops, admissionv1.Create)
	if gr.Group == "" && slices.Contains([]string{"pods", "services", "persistentvolumeclaims"}, gr.Resource) {
		return len(hard) > 0 && (creates || slices.Contains(t.ops, admissionv1.Update))
	}
	for name := range hard {
		counted, isCount := strings.CutPrefix(string(name), "count/")
		if creates && (isCount && counted == gr.String() || !isCount && gr.Group == "" && counted == gr.Resource) {
			return true
		}
	}
	return false
}
