package core

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"universalcontroller.dev/uc/schemas/hooks"
)

// TestRelatedRuleNamespaces: which namespaces a related rule looks in, as
// Metacontroller v4.17 does: a v1 hook's namespaced parent sees namespaced
// objects of its own namespace only; a v2 hook's sees those of the namespace
// its rule names, or of every namespace; a cluster-scoped kind is seen by
// every parent.
func TestRelatedRuleNamespaces(t *testing.T) {
	namespaced := Resource{Namespaced: true}
	obj := func(ns string) *unstructured.Unstructured {
		o := &unstructured.Unstructured{Object: map[string]any{}}
		o.SetNamespace(ns)
		o.SetName("o")
		return o
	}
	noLabels := func(string) labels.Set { return nil }
	for _, tc := range []struct {
		name     string
		rule     relatedRule
		parentNS string
		obj      *unstructured.Unstructured
		lookIn   string
		matches  bool
	}{
		{"v1, namespaced parent, its namespace", relatedRule{res: namespaced, selector: labels.Everything()}, "p", obj("p"), "p", true},
		{"v1, namespaced parent, another namespace", relatedRule{res: namespaced, selector: labels.Everything()}, "p", obj("other"), "p", false},
		{"v1, a namespace named in the rule is not the parent's", relatedRule{RelatedResourceRule: hooks.RelatedResourceRule{Namespace: "other"}, res: namespaced, selector: labels.Everything()}, "p", obj("other"), "p", false},
		{"v1, cluster-scoped parent, any namespace", relatedRule{res: namespaced, selector: labels.Everything()}, "", obj("other"), "", true},
		{"v1, namespaced parent, a cluster-scoped kind", relatedRule{res: Resource{}, selector: labels.Everything()}, "p", obj(""), "", true},
		{"v2, namespaced parent, every namespace", relatedRule{res: namespaced, selector: labels.Everything(), v2: true}, "p", obj("other"), "", true},
		{"v2, the namespace the rule names", relatedRule{RelatedResourceRule: hooks.RelatedResourceRule{Namespace: "src"}, res: namespaced, selector: labels.Everything(), v2: true}, "p", obj("src"), "src", true},
		{"v2, not another than the rule names", relatedRule{RelatedResourceRule: hooks.RelatedResourceRule{Namespace: "src"}, res: namespaced, selector: labels.Everything(), v2: true}, "p", obj("p"), "src", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.rule.lookIn(tc.parentNS); got != tc.lookIn {
				t.Errorf("lookIn = %q, want %q", got, tc.lookIn)
			}
			if got := tc.rule.matches(tc.obj, tc.parentNS, noLabels); got != tc.matches {
				t.Errorf("matches = %v, want %v", got, tc.matches)
			}
		})
	}
}
