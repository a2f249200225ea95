package e2e

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"

	"universalcontroller.dev/uc/schemas/v1alpha1"
	"universalcontroller.dev/uc/test/testbed"
)

// TestRefusalReported: a write the apiserver keeps refusing for
// a reason worth a retry is retried with backoff, and once the refusal
// persists it is reported on the parent — one Warning Event ApplyFailed and
// Synced=False, naming the object and the apiserver's answer — where before
// only uc's log said so; once the cause is gone, the parent converges and
// Synced is True again. Two causes: an admission webhook that is down
// (failurePolicy Fail: every write of the parent's ConfigMaps fails with a
// 500), and a ValidatingAdmissionPolicy that refuses uc's own
// ControllerRevisions, which a controller that rolls its children out saves
// before it touches a child.
func TestRefusalReported(t *testing.T) {
	for _, tc := range []struct {
		name   string
		method string // the ConfigMaps' update method
		// refuse makes the apiserver refuse the parent's writes in ns, and
		// returns what lifts the refusal.
		refuse func(t *testing.T, ns string) (lift func())
		want   func(ns string) []string // what the report names
	}{
		{"webhook down", "InPlace", webhookDown, func(ns string) []string {
			return []string{"create configmaps " + ns + "/c", `failed calling webhook "down.e2e.universalcontroller.dev"`}
		}},
		{"revisions refused", "RollingInPlace", revisionsRefused, func(string) []string {
			return []string{"save revision", "e2e: no revisions here"}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			ns := namespace(t)
			ctl := "refusal-" + strings.ToLower(tc.method)
			registerComposite(t, ctl, func(spec map[string]any) {
				spec["childResources"] = []any{map[string]any{"apiVersion": "v1", "resource": "configmaps",
					"updateStrategy": map[string]any{"method": tc.method}}}
			})
			lift := tc.refuse(t, ns)
			log := tailUCLog(t)
			createComposite(t, ns, "p", ctl, map[string]any{"selector": selectApp("refused"),
				"children": []any{cm("c", map[string]any{"app": "refused"}, map[string]any{"k": "v"})}})

			eventually(t, time.Minute, func() error {
				for _, want := range tc.want(ns) {
					if err := syncFailed(ctx, compositeGVR, ns, "p", "ApplyFailed", want); err != nil {
						return err
					}
				}
				return nil
			})
			// Retried meanwhile, with backoff: two more failures after the
			// report.
			eventually(t, time.Minute, func() error {
				if n := failedApplies(log.read(t), ns+"/p"); n < 5 {
					return fmt.Errorf("%d failed applies logged, want 5", n)
				}
				return nil
			})
			if _, err := env.kube.CoreV1().ConfigMaps(ns).Get(ctx, "c", metav1.GetOptions{}); err == nil {
				t.Fatal("the ConfigMap exists while its parent's apply is refused")
			}

			lift()
			lifted := time.Now()
			eventually(t, time.Minute, func() error {
				if _, err := env.kube.CoreV1().ConfigMaps(ns).Get(ctx, "c", metav1.GetOptions{}); err != nil {
					return err
				}
				p, err := getComposite(ctx, ns, "p")
				if err != nil {
					return err
				}
				return syncedTrue(p)
			})
			t.Logf("converged %s after the refusal was lifted", time.Since(lifted).Round(100*time.Millisecond))

			// One Event, however many attempts failed.
			events, err := env.kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: fields.SelectorFromSet(fields.Set{
				"involvedObject.name": "p", "type": corev1.EventTypeWarning, "reason": "ApplyFailed"}).String()})
			if err != nil {
				t.Fatal(err)
			}
			if len(events.Items) != 1 || events.Items[0].Count > 1 {
				for _, e := range events.Items {
					t.Logf("event (count %d): %s", e.Count, e.Message)
				}
				t.Errorf("%d ApplyFailed Events, want one, recorded once", len(events.Items))
			}
		})
	}
}

// logTail is what the shared uc logs from the moment it was made on.
type logTail struct {
	path string
	from int64
}

func tailUCLog(t *testing.T) logTail {
	path := filepath.Join(env.uc.dir, "uc.log")
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return logTail{path, info.Size()}
}

func (l logTail) read(t *testing.T) string {
	f, err := os.Open(l.path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.NewSectionReader(f, l.from, math.MaxInt64-l.from))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// failedApplies counts the applies of the parent (namespace/name) that a
// log of uc says failed.
func failedApplies(log, parent string) int {
	n := 0
	for line := range strings.Lines(log) {
		if strings.Contains(line, `msg="apply failed; will retry"`) && strings.Contains(line, " parent="+parent+" ") {
			n++
		}
	}
	return n
}

// webhookDown registers a validating admission webhook for the ConfigMaps
// of namespace ns that nothing serves, with failurePolicy Fail.
func webhookDown(t *testing.T, ns string) (lift func()) {
	port, err := testbed.FreePort() // nothing listens there
	if err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("https://127.0.0.1:%d/validate", port)
	fail, none, timeout := admissionv1.Fail, admissionv1.SideEffectClassNone, int32(2)
	webhooks := env.kube.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	cfg := &admissionv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "down-" + ns},
		Webhooks: []admissionv1.ValidatingWebhook{{
			Name:         "down.e2e.universalcontroller.dev",
			ClientConfig: admissionv1.WebhookClientConfig{URL: &url},
			Rules: []admissionv1.RuleWithOperations{{
				Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update},
				Rule:       admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
			}},
			NamespaceSelector:       inNamespace(ns),
			FailurePolicy:           &fail,
			SideEffects:             &none,
			TimeoutSeconds:          &timeout,
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
	if _, err := webhooks.Create(t.Context(), cfg, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = webhooks.Delete(context.Background(), cfg.Name, metav1.DeleteOptions{}) })
	probe := func(ctx context.Context) error {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: ns}}
		_, err := env.kube.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	}
	inForce(t, probe, "failed calling webhook")
	return func() {
		if err := webhooks.Delete(t.Context(), cfg.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		inForce(t, probe, "")
	}
}

// revisionsRefused binds a ValidatingAdmissionPolicy that refuses every
// write of a ControllerRevision in namespace ns.
func revisionsRefused(t *testing.T, ns string) (lift func()) {
	fail := admissionv1.Fail
	name := "refuse-revisions-" + ns
	policies := env.kube.AdmissionregistrationV1().ValidatingAdmissionPolicies()
	policy := &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update},
					Rule: admissionv1.Rule{APIGroups: []string{v1alpha1.Group}, APIVersions: []string{"*"},
						Resources: []string{v1alpha1.RevisionResource.Resource}},
				},
			}}},
			Validations: []admissionv1.Validation{{Expression: "false", Message: "e2e: no revisions here"}},
		},
	}
	if _, err := policies.Create(t.Context(), policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = policies.Delete(context.Background(), name, metav1.DeleteOptions{}) })
	bindings := env.kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings()
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
			MatchResources:    &admissionv1.MatchResources{NamespaceSelector: inNamespace(ns)},
		},
	}
	if _, err := bindings.Create(t.Context(), binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bindings.Delete(context.Background(), name, metav1.DeleteOptions{}) })
	probe := func(ctx context.Context) error {
		rev := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": v1alpha1.RevisionResource.GroupVersion().String(), "kind": "ControllerRevision",
			"metadata":    map[string]any{"name": "probe", "namespace": ns},
			"parentPatch": map[string]any{}, "revision": int64(1),
		}}
		_, err := env.dyn.Resource(v1alpha1.RevisionResource).Namespace(ns).Create(ctx, rev, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	}
	inForce(t, probe, "e2e: no revisions here")
	return func() {
		if err := bindings.Delete(t.Context(), name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		inForce(t, probe, "")
	}
}

func inNamespace(ns string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}}
}

// inForce waits until a dry-run write, probe, is refused with an error
// naming want, or, with want "", until it is accepted: the apiserver takes
// up a change of its admission configuration a moment later.
func inForce(t *testing.T, probe func(context.Context) error, want string) {
	t.Helper()
	eventually(t, 30*time.Second, func() error {
		err := probe(t.Context())
		switch {
		case want == "" && err != nil:
			return fmt.Errorf("still refused: %w", err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			return fmt.Errorf("not refused naming %q yet: %v", want, err)
		}
		return nil
	})
}
