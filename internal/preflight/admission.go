package preflight

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	admissionlisters "k8s.io/client-go/listers/admissionregistration/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// admission watches what admits or refuses writes beyond their own
// validity: admission webhooks, ValidatingAdmissionPolicies and their
// bindings, MutatingAdmissionPolicy bindings (where the apiserver serves
// them), ResourceQuotas and Namespaces.
type admission struct {
	factory    informers.SharedInformerFactory
	validating admissionlisters.ValidatingWebhookConfigurationLister
	mutating   admissionlisters.MutatingWebhookConfigurationLister
	policies   admissionlisters.ValidatingAdmissionPolicyLister
	bindings   admissionlisters.ValidatingAdmissionPolicyBindingLister
	quotas     corelisters.ResourceQuotaLister
	namespaces corelisters.NamespaceLister
	synced     []cache.InformerSynced
	disco      discovery.DiscoveryInterface
	dyn        dynamic.Interface
	log        *slog.Logger

	mu sync.Mutex
	// mutatingPolicies is the informer on MutatingAdmissionPolicyBindings,
	// once discovery said whether the apiserver serves them (nil: it does
	// not).
	mutatingPolicies cache.SharedIndexInformer
	discovered       bool
}

func newAdmission(disco discovery.DiscoveryInterface, kube kubernetes.Interface, dyn dynamic.Interface, log *slog.Logger) *admission {
	f := informers.NewSharedInformerFactory(kube, 0)
	a := &admission{factory: f, disco: disco, dyn: dyn, log: log}
	admission := f.Admissionregistration().V1()
	a.validating = admission.ValidatingWebhookConfigurations().Lister()
	a.mutating = admission.MutatingWebhookConfigurations().Lister()
	a.policies = admission.ValidatingAdmissionPolicies().Lister()
	a.bindings = admission.ValidatingAdmissionPolicyBindings().Lister()
	a.quotas = f.Core().V1().ResourceQuotas().Lister()
	a.namespaces = f.Core().V1().Namespaces().Lister()
	for typ, inf := range map[string]cache.SharedIndexInformer{
		"ValidatingWebhookConfigurations":   admission.ValidatingWebhookConfigurations().Informer(),
		"MutatingWebhookConfigurations":     admission.MutatingWebhookConfigurations().Informer(),
		"ValidatingAdmissionPolicies":       admission.ValidatingAdmissionPolicies().Informer(),
		"ValidatingAdmissionPolicyBindings": admission.ValidatingAdmissionPolicyBindings().Informer(),
		"ResourceQuotas":                    f.Core().V1().ResourceQuotas().Informer(),
		"Namespaces":                        f.Core().V1().Namespaces().Informer(),
	} {
		a.watchErrors(inf, typ)
		a.synced = append(a.synced, inf.HasSynced)
	}
	return a
}

// watchErrors logs an informer's failures to list or watch: meanwhile,
// every reply is dry-run.
func (a *admission) watchErrors(inf cache.SharedIndexInformer, typ string) {
	// Not started yet, so setting the handler cannot fail.
	_ = inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		a.log.Warn("list or watch "+typ+" (until they are listed, every reply is dry-run)", "err", err)
		cache.DefaultWatchErrorHandler(ctx, r, err)
	})
}

// run starts the informers, and finds out whether the apiserver serves
// MutatingAdmissionPolicies, until ctx ends.
func (a *admission) run(ctx context.Context) {
	a.factory.Start(ctx.Done())
	defer a.factory.Shutdown()
	_ = wait.PollUntilContextCancel(ctx, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		gvr, served, err := mutatingPolicyBindings(a.disco)
		if err != nil {
			a.log.Warn("discover MutatingAdmissionPolicies (until then, every reply is dry-run)", "err", err)
			return false, nil
		}
		var inf cache.SharedIndexInformer
		if served {
			inf = dynamicinformer.NewFilteredDynamicInformer(a.dyn, gvr, metav1.NamespaceAll, 0, cache.Indexers{}, nil).Informer()
			a.watchErrors(inf, "MutatingAdmissionPolicyBindings")
			go inf.Run(ctx.Done())
		}
		a.mu.Lock()
		a.mutatingPolicies, a.discovered = inf, true
		a.mu.Unlock()
		return true, nil
	})
	<-ctx.Done()
}

// mutatingPolicyBindings finds the resource of MutatingAdmissionPolicy
// bindings, in the newest version the apiserver serves, if it does.
func mutatingPolicyBindings(disco discovery.DiscoveryInterface) (schema.GroupVersionResource, bool, error) {
	groups, err := disco.ServerGroups()
	if err != nil {
		return schema.GroupVersionResource{}, false, err
	}
	i := slices.IndexFunc(groups.Groups, func(g metav1.APIGroup) bool { return g.Name == admissionv1.GroupName })
	if i < 0 {
		return schema.GroupVersionResource{}, false, nil
	}
	for _, v := range groups.Groups[i].Versions {
		list, err := disco.ServerResourcesForGroupVersion(v.GroupVersion)
		if err != nil {
			return schema.GroupVersionResource{}, false, err
		}
		if slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == "mutatingadmissionpolicybindings" }) {
			return schema.GroupVersionResource{Group: admissionv1.GroupName, Version: v.Version, Resource: "mutatingadmissionpolicybindings"}, true, nil
		}
	}
	return schema.GroupVersionResource{}, false, nil
}

// couldRefuse tells what in the cluster's admission could refuse the
// write, or "".
func (a *admission) couldRefuse(w Write) string {
	a.mu.Lock()
	mutatingPolicies, discovered := a.mutatingPolicies, a.discovered
	a.mu.Unlock()
	if !discovered || slices.ContainsFunc(a.synced, func(synced cache.InformerSynced) bool { return !synced() }) || mutatingPolicies != nil && !mutatingPolicies.HasSynced() {
		return "admission webhooks, policies, quotas and namespaces are not listed yet"
	}
	if mutatingPolicies != nil && len(mutatingPolicies.GetStore().ListKeys()) > 0 {
		return "MutatingAdmissionPolicies are bound, and uc does not match them"
	}
	t, why := a.target(w)
	if why != "" {
		return why
	}
	webhooks, err := a.validating.List(labels.Everything())
	if err != nil {
		return err.Error()
	}
	for _, c := range webhooks {
		for _, h := range c.Webhooks {
			if t.webhookMayApply(h.Rules, h.MatchPolicy, h.NamespaceSelector, h.ObjectSelector) {
				return fmt.Sprintf("validating webhook %s of %s may apply", h.Name, c.Name)
			}
		}
	}
	mutators, err := a.mutating.List(labels.Everything())
	if err != nil {
		return err.Error()
	}
	for _, c := range mutators {
		for _, h := range c.Webhooks {
			if t.webhookMayApply(h.Rules, h.MatchPolicy, h.NamespaceSelector, h.ObjectSelector) {
				return fmt.Sprintf("mutating webhook %s of %s may apply", h.Name, c.Name)
			}
		}
	}
	if why := a.policyMayRefuse(t); why != "" {
		return why
	}
	if !t.namespaced {
		return ""
	}
	quotas, err := a.quotas.ResourceQuotas(w.object().GetNamespace()).List(labels.Everything())
	if err != nil {
		return err.Error()
	}
	for _, q := range quotas {
		if t.quotaMayRefuse(q.Spec.Hard) {
			return fmt.Sprintf("ResourceQuota %s may apply", q.Name)
		}
	}
	return ""
}

// policyMayRefuse tells which ValidatingAdmissionPolicy may deny the
// write, or "": one whose binding denies (not only warns or audits), and
// where both match it.
func (a *admission) policyMayRefuse(t target) string {
	bindings, err := a.bindings.List(labels.Everything())
	if err != nil {
		return err.Error()
	}
	for _, b := range bindings {
		if !slices.Contains(b.Spec.ValidationActions, admissionv1.Deny) || !t.resourcesMatch(b.Spec.MatchResources) {
			continue
		}
		p, err := a.policies.Get(b.Spec.PolicyName)
		if err != nil || p.Spec.MatchConstraints == nil || t.resourcesMatch(p.Spec.MatchConstraints) {
			return fmt.Sprintf("ValidatingAdmissionPolicy %s, bound by %s, may apply", b.Spec.PolicyName, b.Name)
		}
	}
	return ""
}

// target describes the write to admission. A write that creates an
// object in a namespace that is gone, or going, could be refused.
func (a *admission) target(w Write) (target, string) {
	t := target{
		resource:   w.Resource.GVR,
		namespaced: w.Resource.Namespaced,
		ops:        w.operations(),
		name:       w.object().GetName(),
	}
	switch {
	case w.Verb == Create:
		t.objects = []labelChoice{{fixed: w.New.GetLabels()}}
	case w.New == nil && w.Old != nil: // the labels stay as they are
		t.objects = []labelChoice{{fixed: w.Old.GetLabels()}}
	case w.Verb == Apply && w.Old != nil:
		t.objects = []labelChoice{{fixed: w.Old.GetLabels()}, {fixed: w.New.GetLabels(), optional: w.Old.GetLabels()}}
	}
	if !t.namespaced {
		return t, ""
	}
	name := w.object().GetNamespace()
	ns, err := a.namespaces.Get(name)
	switch {
	case apierrors.IsNotFound(err) && slices.Contains(t.ops, admissionv1.Create):
		return t, fmt.Sprintf("namespace %s is not known", name)
	case err == nil && (ns.DeletionTimestamp != nil || ns.Status.Phase == corev1.NamespaceTerminating) && slices.Contains(t.ops, admissionv1.Create):
		return t, fmt.Sprintf("namespace %s is being deleted", name)
	case err == nil:
		t.namespace = ns.Labels
		if t.namespace == nil {
			t.namespace = labels.Set{}
		}
	}
	return t, ""
}
