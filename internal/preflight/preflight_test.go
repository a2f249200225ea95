package preflight

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// checker runs a Checker on a fake apiserver holding objs, where uc may do
// everything but what denied lists ("verb resource"), until the test ends.
func checker(t *testing.T, denied []string, objs ...runtime.Object) *Checker {
	t.Helper()
	kube := fake.NewClientset(append(objs, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns", Labels: map[string]string{"team": "a"}}})...)
	kube.PrependReactor("create", "selfsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		r := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview)
		attrs := r.Spec.ResourceAttributes
		for _, d := range denied {
			if d == attrs.Verb+" "+attrs.Resource {
				return true, r, nil
			}
		}
		r.Status.Allowed = true
		return true, r, nil
	})
	c := New(kube, kube, dynamicfake.NewSimpleDynamicClient(runtime.NewScheme()), fakeCRDs{}, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	probe := Write{Verb: Delete, Resource: configMaps, Old: obj(t, goodConfigMap)}
	if err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return !strings.Contains(c.admission.couldRefuse(probe), "not listed yet"), nil
	}); err != nil {
		t.Fatalf("the informers did not sync: %v", err)
	}
	return c
}

const goodConfigMap = `{apiVersion: v1, kind: ConfigMap, metadata: {name: cm, namespace: ns, labels: {app: x}}, data: {key: v}}`

func TestCouldRefuse(t *testing.T) {
	deny := []admissionv1.ValidationAction{admissionv1.Deny}
	configMapRule := rule([]string{""}, []string{"v1"}, []string{"configmaps"}, admissionv1.Create, admissionv1.Update)
	policy := &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "no-third"},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{MatchConstraints: &admissionv1.MatchResources{
			ResourceRules: []admissionv1.NamedRuleWithOperations{{RuleWithOperations: configMapRule}},
		}},
	}
	webhook := func(rules ...admissionv1.RuleWithOperations) *admissionv1.ValidatingWebhookConfiguration {
		return &admissionv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "hooks"},
			Webhooks: []admissionv1.ValidatingWebhook{{Name: "check.example.com", Rules: rules}}}
	}
	one := resource.MustParse("1")
	for _, tc := range []struct {
		name   string
		objs   []runtime.Object
		denied []string
		write  Write
		want   string // in the reason; "" for none
	}{
		{name: "nothing in the way", write: Write{Verb: Create, Resource: configMaps, New: obj(t, goodConfigMap)}},
		{name: "an invalid object", write: Write{Verb: Create, Resource: configMaps, New: obj(t, `{apiVersion: v1, kind: ConfigMap, metadata: {name: cm, namespace: ns}, data: {"bad key!": v}}`)},
			want: "data[bad key!]"},
		{name: "a webhook on ConfigMaps", objs: []runtime.Object{webhook(configMapRule)},
			write: Write{Verb: Create, Resource: configMaps, New: obj(t, goodConfigMap)}, want: "validating webhook check.example.com of hooks"},
		{name: "a webhook on Secrets", objs: []runtime.Object{webhook(rule([]string{""}, []string{"v1"}, []string{"secrets"}, admissionv1.Create))},
			write: Write{Verb: Create, Resource: configMaps, New: obj(t, goodConfigMap)}},
		{name: "a mutating webhook", objs: []runtime.Object{&admissionv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "mutators"},
			Webhooks: []admissionv1.MutatingWebhook{{Name: "set.example.com", Rules: []admissionv1.RuleWithOperations{configMapRule}}}}},
			write: Write{Verb: Create, Resource: configMaps, New: obj(t, goodConfigMap)}, want: "mutating webhook set.example.com"},
		{name: "a bound policy that denies", objs: []runtime.Object{policy, &admissionv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "b"},
			Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "no-third", ValidationActions: deny}}},
			write: Write{Verb: Create, Resource: configMaps, New: obj(t, goodConfigMap)}, want: "ValidatingAdmissionPolicy no-third"},
		{name: "a bound policy that warns", objs: []runtime.Object{policy, &admissionv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "b"},
			Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "no-third", ValidationActions: []admissionv1.ValidationAction{admissionv1.Warn}}}},
			write: Write{Verb: Create, Resource: configMaps, New: obj(t, goodConfigMap)}},
		{name: "a binding of a missing policy", objs: []runtime.Object{&admissionv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "b"},
			Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "missing", ValidationActions: deny}}},
			write: Write{Verb: Create, Resource: configMaps, New: obj(t, goodConfigMap)}, want: "ValidatingAdmissionPolicy missing"},
		{name: "a policy bound elsewhere", objs: []runtime.Object{policy, &admissionv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "b"},
			Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "no-third", ValidationActions: deny, MatchResources: &admissionv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "b"}}}}}},
			write: Write{Verb: Create, Resource: configMaps, New: obj(t, goodConfigMap)}},
		{name: "a quota on ConfigMaps", objs: []runtime.Object{&corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "q", Namespace: "ns"},
			Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"count/configmaps": one}}}},
			write: Write{Verb: Create, Resource: configMaps, New: obj(t, goodConfigMap)}, want: "ResourceQuota q"},
		{name: "a quota in another namespace", objs: []runtime.Object{&corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "q", Namespace: "other"},
			Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"count/configmaps": one}}}},
			write: Write{Verb: Create, Resource: configMaps, New: obj(t, goodConfigMap)}},
		{name: "a namespace being deleted", objs: []runtime.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "going"}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating}}},
			write: Write{Verb: Create, Resource: configMaps, New: obj(t, strings.Replace(goodConfigMap, "namespace: ns", "namespace: going", 1))}, want: "being deleted"},
		{name: "an unknown namespace", write: Write{Verb: Create, Resource: configMaps, New: obj(t, strings.Replace(goodConfigMap, "namespace: ns", "namespace: nowhere", 1))},
			want: "not known"},
		{name: "a delete in a namespace being deleted", objs: []runtime.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "going"}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating}}},
			write: Write{Verb: Delete, Resource: configMaps, Old: obj(t, strings.Replace(goodConfigMap, "namespace: ns", "namespace: going", 1))}},
		{name: "not allowed", denied: []string{"create configmaps"}, write: Write{Verb: Create, Resource: configMaps, New: obj(t, goodConfigMap)},
			want: "uc may not create it"},
		{name: "an apply may create", denied: []string{"create configmaps"}, write: Write{Verb: Apply, Resource: configMaps, New: obj(t, goodConfigMap), Old: obj(t, goodConfigMap)},
			want: "uc may not create it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := checker(t, tc.denied, tc.objs...).CouldRefuse(t.Context(), tc.write)
			if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
				t.Fatalf("could refuse: %q, want %q", got, tc.want)
			}
		})
	}
}

// The authorizer is asked once per verb and resource for all namespaces,
// then again once its answer is older than authzTTL.
func TestAuthorizationIsAskedOncePerTTL(t *testing.T) {
	kube := fake.NewClientset()
	reviews := 0
	kube.PrependReactor("create", "selfsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		reviews++
		r := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview)
		r.Status.Allowed = true
		return true, r, nil
	})
	a := newAuthz(kube.AuthorizationV1().SelfSubjectAccessReviews())
	now := time.Now()
	a.now = func() time.Time { return now }
	w := Write{Verb: Create, Resource: configMaps, New: obj(t, goodConfigMap)}
	for range 3 {
		if why := a.couldRefuse(t.Context(), w); why != "" {
			t.Fatal(why)
		}
	}
	if reviews != 1 {
		t.Fatalf("%d reviews, want 1", reviews)
	}
	now = now.Add(authzTTL)
	_ = a.couldRefuse(t.Context(), w)
	if reviews != 2 {
		t.Fatalf("%d reviews after the TTL, want 2", reviews)
	}
}
