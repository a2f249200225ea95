package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/sdk/go/hook"
)

var (
	crateGVR = schema.GroupVersionResource{Group: "e2e.universalcontroller.dev", Version: "v1", Resource: "crates"}
	gizmoGVR = schema.GroupVersionResource{Group: "e2e.universalcontroller.dev", Version: "v1", Resource: "gizmos"}
)

// crateGizmos is how many Gizmos a Crate's hook replies.
const crateGizmos = 5

// crateSync replies crateGizmos Gizmos of the Crate's spec.size, named
// <crate>-<n>. spec.mode makes the third one "refused" (spec.refuse, which
// the test's admission policy denies) or "invalid" (spec.size a string).
func crateSync(_ context.Context, req *hooks.SyncRequest) (*hooks.SyncResponse, error) {
	mode, _, _ := unstructured.NestedString(req.Parent.Object, "spec", "mode")
	size, _, _ := unstructured.NestedInt64(req.Parent.Object, "spec", "size")
	resp := &hooks.SyncResponse{Status: map[string]any{"mode": mode}}
	for n := 1; n <= crateGizmos; n++ {
		spec := map[string]any{"size": size}
		switch {
		case n == 3 && mode == "refused":
			spec["refuse"] = true
		case n == 3 && mode == "invalid":
			spec["size"] = "three"
		}
		resp.Children = append(resp.Children, gizmo(fmt.Sprintf("%s-%d", req.Parent.GetName(), n), spec))
	}
	return resp, nil
}

func gizmo(name string, spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": gizmoGVR.GroupVersion().String(), "kind": "Gizmo",
		"metadata": map[string]any{"name": name}, "spec": spec,
	}}
}

func createCrate(t *testing.T, ns, name, mode string, size int64) {
	t.Helper()
	crate := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": crateGVR.GroupVersion().String(), "kind": "Crate",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     map[string]any{"mode": mode, "size": size},
	}}
	if _, err := env.dyn.Resource(crateGVR).Namespace(ns).Create(t.Context(), crate, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// gizmoSizes returns the spec.size of each of a Crate's Gizmos that
// exists, by name.
func gizmoSizes(ctx context.Context, ns, crate string) (map[string]int64, error) {
	out := map[string]int64{}
	for n := 1; n <= crateGizmos; n++ {
		name := fmt.Sprintf("%s-%d", crate, n)
		g, err := env.dyn.Resource(gizmoGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return nil, err
		}
		out[name], _, _ = unstructured.NestedInt64(g.Object, "spec", "size")
	}
	return out, nil
}

// dryRuns is the number of dry-run requests on a resource the apiserver
// has served (apiserver_request_total).
func dryRuns(t *testing.T, resource string) int {
	t.Helper()
	raw, err := env.kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "apiserver_request_total{") || !strings.Contains(line, `resource="`+resource+`"`) || strings.Contains(line, `dry_run=""`) || !strings.Contains(line, "dry_run=") {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		n += int(v)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}

// denyRefusedGizmos makes a ValidatingAdmissionPolicy (CEL, no webhook)
// that denies a Gizmo whose spec.refuse is true, bound to one namespace,
// and waits until the apiserver enforces it.
func denyRefusedGizmos(t *testing.T, ns string) {
	t.Helper()
	ctx := t.Context()
	policies := env.kube.AdmissionregistrationV1().ValidatingAdmissionPolicies()
	bindings := env.kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings()
	policy := &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-refused-gizmos"},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update},
					Rule:       admissionv1.Rule{APIGroups: []string{gizmoGVR.Group}, APIVersions: []string{"*"}, Resources: []string{gizmoGVR.Resource}},
				},
			}}},
			Validations: []admissionv1.Validation{{Expression: "!has(object.spec.refuse) || !object.spec.refuse", Message: "the e2e policy refuses this Gizmo"}},
		},
	}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-refused-gizmos"},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        policy.Name,
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
			MatchResources: &admissionv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns},
			}},
		},
	}
	if _, err := policies.Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = policies.Delete(context.Background(), policy.Name, metav1.DeleteOptions{}) })
	if _, err := bindings.Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bindings.Delete(context.Background(), binding.Name, metav1.DeleteOptions{}) })
	// The apiserver loads policies on its own time.
	probe := gizmo("probe", map[string]any{"size": int64(1), "refuse": true})
	eventually(t, time.Minute, func() error {
		_, err := env.dyn.Resource(gizmoGVR).Namespace(ns).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err == nil {
			return errors.New("the policy is not enforced yet")
		}
		return nil
	})
}

// TestDryRunsOnlyWhereSomethingCouldRefuse: uc writes a reply without dry
// runs when nothing could refuse it; a ValidatingAdmissionPolicy that
// refuses the third child of a reply, and a schema violation in it that uc
// catches on the client, still leave nothing of the reply written, and are
// reported as the apiserver's refusal is.
func TestDryRunsOnlyWhereSomethingCouldRefuse(t *testing.T) {
	ctx := t.Context()
	installCRD(t, "test/e2e/testdata/crate-crds.yaml", crateGVR)
	installCRD(t, "test/e2e/testdata/crate-crds.yaml", gizmoGVR)
	serveHooks(t, "crate-controller", hook.Func(hooks.Sync, crateSync))
	registerManifest(t, "test/e2e/testdata/crate-controller.yaml", nil)
	ns := namespace(t)
	policed := extraNamespace(t, ns+"-policed")
	denyRefusedGizmos(t, policed)

	// Nothing could refuse: the policy is bound to another namespace. The
	// Gizmos are created, then updated, without a dry run.
	converged := func(size int64) {
		eventually(t, time.Minute, func() error {
			sizes, err := gizmoSizes(ctx, ns, "plain")
			if err != nil {
				return err
			}
			for n := 1; n <= crateGizmos; n++ {
				if got, ok := sizes[fmt.Sprintf("plain-%d", n)]; !ok || got != size {
					return fmt.Errorf("Gizmos %v, want %d of size %d", sizes, crateGizmos, size)
				}
			}
			return nil
		})
	}
	before := dryRuns(t, gizmoGVR.Resource)
	createCrate(t, ns, "plain", "", 1)
	converged(1)
	if _, err := env.dyn.Resource(crateGVR).Namespace(ns).Patch(ctx, "plain", types.MergePatchType, []byte(`{"spec":{"size":2}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	converged(2)
	if n := dryRuns(t, gizmoGVR.Resource) - before; n != 0 {
		t.Fatalf("%d dry runs on gizmos for replies nothing could refuse, want 0", n)
	}

	for _, tc := range []struct {
		name, ns, mode string
		want           func(t *testing.T) string // the message of the refusal
	}{
		{"refused by the policy", policed, "refused", func(*testing.T) string { return "the e2e policy refuses this Gizmo" }},
		// The apiserver's own answer to the invalid Gizmo, which uc caught
		// on the client and had the apiserver confirm.
		{"invalid", ns, "invalid", func(t *testing.T) string {
			_, err := env.dyn.Resource(gizmoGVR).Namespace(ns).Create(ctx, gizmo("invalid-3", map[string]any{"size": "three"}), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			if !apierrors.IsInvalid(err) {
				t.Fatalf("the apiserver's answer to the invalid Gizmo: %v", err)
			}
			return err.Error()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := tc.want(t)
			before := dryRuns(t, gizmoGVR.Resource)
			createCrate(t, tc.ns, tc.mode, tc.mode, 1)
			eventually(t, time.Minute, func() error { return syncFailed(ctx, crateGVR, tc.ns, tc.mode, "ApplyFailed", want) })
			if sizes, err := gizmoSizes(ctx, tc.ns, tc.mode); err != nil || len(sizes) > 0 {
				t.Fatalf("Gizmos of the refused reply exist: %v (err %v)", sizes, err)
			}
			if dryRuns(t, gizmoGVR.Resource) == before {
				t.Fatal("the refused reply was not dry-run")
			}
		})
	}
}
