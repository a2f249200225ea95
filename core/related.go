package core

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// A controller with a customize hook asks it, once per parent generation,
// which related objects the parent's sync requests carry: its reply is a
// parent's Rules.

// relatedRule is a relatedResources entry, resolved.
type relatedRule struct {
	hooks.RelatedResourceRule
	res       Resource
	selector  labels.Selector // nil when the rule selects by names
	namespace labels.Selector // v2 namespaceSelector, or nil
	v2        bool            // of a customize hook of version v2
}

// matches tells whether the rule selects obj for a parent in parentNS ("" for
// a cluster-scoped parent, which may look in any namespace).
func (r relatedRule) matches(obj metav1.Object, parentNS string, nsLabels func(string) labels.Set) bool {
	ns := obj.GetNamespace()
	switch {
	case r.parentNamespaceOnly(parentNS) && ns != parentNS:
		return false
	case r.Namespace != "" && ns != r.Namespace:
		return false
	case r.namespace != nil && !r.namespace.Matches(nsLabels(ns)):
		return false
	case r.selector == nil:
		for _, n := range r.Names {
			if n == obj.GetName() {
				return true
			}
		}
		return false
	}
	return r.selector.Matches(labels.Set(obj.GetLabels()))
}

// lookIn is the one namespace the rule can select objects in, or "" for all.
func (r relatedRule) lookIn(parentNS string) string {
	switch {
	case r.parentNamespaceOnly(parentNS):
		return parentNS
	case r.Namespace != "":
		return r.Namespace
	}
	return ""
}

// parentNamespaceOnly tells whether the rule selects namespaced objects in
// the parent's namespace alone, as Metacontroller's v1 hooks do for a
// namespaced parent. A v2 hook's rule looks in the namespace it names, in
// those its namespaceSelector selects, or else in every namespace; objects
// of a cluster-scoped kind are selected whatever the parent's scope.
func (r relatedRule) parentNamespaceOnly(parentNS string) bool {
	return parentNS != "" && r.res.Namespaced && !r.v2
}

// CustomizeRejected is the failure reported on a parent whose customize
// reply the watcher cannot use: err says why.
func CustomizeRejected(err error) bus.Failure {
	return bus.Failure{Reason: v1alpha1.ReasonInvalidHookReply, Message: "customize hook reply rejected: " + err.Error()}
}

// Rules are the rules of a customize reply, which select the related
// objects of a parent's sync requests.
type Rules struct{ rules []relatedRule }

// CustomizeRules decodes and checks a customize reply as the watcher does,
// its resources resolved with resolve. An error is the reply's problem.
func CustomizeRules(ctl *Controller, data []byte, resolve ResolveFunc) (Rules, error) {
	rules, err := relatedRules(ctl, data, resolve)
	return Rules{rules}, err
}

// Select selects the related objects of a parent's sync request of hook
// version version, as the watcher does, from those list lists (by
// resource, in a namespace or, for "", in all); nsLabels are a
// namespace's labels.
func (r Rules) Select(ctl *Controller, parent *unstructured.Unstructured, version string, list ListFunc, nsLabels func(string) labels.Set) (hooks.GroupedObjects, error) {
	return selectRelated(ctl, parent, version, r.rules, list, nsLabels)
}

// ListFunc lists the objects of a resource in a namespace ("" for all);
// it may leave out those sel does not select.
type ListFunc func(gvr schema.GroupVersionResource, namespace string, sel labels.Selector) ([]*unstructured.Unstructured, error)

// relatedRules decodes and resolves a customize reply.
func relatedRules(ctl *Controller, data []byte, resolve ResolveFunc) ([]relatedRule, error) {
	var resp hooks.CustomizeResponse
	if err := hooks.DecodeReply(data, &resp, ctl.Spec.Hooks.Customize.StrictReplies()); err != nil {
		return nil, fmt.Errorf("not a valid customize response: %w", err)
	}
	if err := resp.Validate(); err != nil {
		return nil, err
	}
	rules := make([]relatedRule, 0, len(resp.RelatedResources))
	for i, rr := range resp.RelatedResources {
		r := relatedRule{RelatedResourceRule: rr, v2: ctl.HookVersion(hooks.Customize) == string(v1alpha1.HookV2)}
		var err error
		if r.res, err = resolve(v1alpha1.ResourceRule{APIVersion: rr.APIVersion, Resource: rr.Resource}); err != nil {
			return nil, fmt.Errorf("relatedResources[%d]: %w", i, err)
		}
		if len(rr.Names) == 0 {
			if r.selector, err = selectorOrEverything(rr.LabelSelector); err != nil {
				return nil, fmt.Errorf("relatedResources[%d].labelSelector: %w", i, err)
			}
		}
		if rr.NamespaceSelector != nil {
			if ctl.HookVersion(hooks.Customize) != string(v1alpha1.HookV2) {
				return nil, fmt.Errorf("relatedResources[%d]: namespaceSelector needs hook version v2", i)
			}
			if r.namespace, err = selectorOrEverything(rr.NamespaceSelector); err != nil {
				return nil, fmt.Errorf("relatedResources[%d].namespaceSelector: %w", i, err)
			}
		}
		rules = append(rules, r)
	}
	return rules, nil
}

func selectorOrEverything(ls *metav1.LabelSelector) (labels.Selector, error) {
	if ls == nil {
		return labels.Everything(), nil
	}
	return metav1.LabelSelectorAsSelector(ls)
}

// Resources are the resources the rules select objects of, which the
// watcher follows.
func (r Rules) Resources() []Resource {
	out := make([]Resource, 0, len(r.rules))
	for _, rule := range r.rules {
		out = append(out, rule.res)
	}
	return out
}

// Selects tells whether a rule selects obj, an object of gvr, for a parent
// in parentNS ("" for a cluster-scoped parent); nsLabels are a namespace's
// labels.
func (r Rules) Selects(gvr schema.GroupVersionResource, obj metav1.Object, parentNS string, nsLabels func(string) labels.Set) bool {
	for _, rule := range r.rules {
		if rule.res.GVR == gvr && rule.matches(obj, parentNS, nsLabels) {
			return true
		}
	}
	return false
}

// selectRelated selects a parent's related objects with the rules of its
// customize reply: every rule's kind has an entry, its objects keyed as
// the hook version asks.
func selectRelated(ctl *Controller, parent *unstructured.Unstructured, version string, rules []relatedRule, list ListFunc, nsLabels func(string) labels.Set) (hooks.GroupedObjects, error) {
	out := hooks.GroupedObjects{}
	for _, r := range rules {
		group := hooks.GroupKey(r.res.GVK.Kind, r.res.APIVersion())
		if out[group] == nil {
			out[group] = hooks.ObjectMap{}
		}
		sel := r.selector
		if sel == nil { // by names
			sel = labels.Everything()
		}
		objs, err := list(r.res.GVR, r.lookIn(parent.GetNamespace()), sel)
		if err != nil {
			return nil, err
		}
		for _, u := range objs {
			if r.matches(u, parent.GetNamespace(), nsLabels) {
				out.Insert(hooks.ObjectKey(version, ctl.Parent.Namespaced, u), u)
			}
		}
	}
	return out, nil
}
