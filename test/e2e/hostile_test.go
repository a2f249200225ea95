package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// TestHostileWebhook: a webhook in Python answers, parent by parent, with
// every kind of bad reply — undeclared kinds, another namespace, a
// cluster-scoped child, another parent's child, an unowned object, an
// invalid name, wrong JSON types, not JSON, a 10,000-level nested document,
// a reply over the size limit, 5,000 children, a timeout and a dropped
// connection. Each hostile parent gets a Warning Event and Synced=False
// naming its problem; nothing outside what the controller declares changes;
// parents with good replies converge and take an edit meanwhile; uc stays up.
func TestHostileWebhook(t *testing.T) {
	ctx := t.Context()
	const controller = "hostile-echo"
	url := startPythonHook(t, "test/e2e/testdata/hostile-webhook.py")
	registerEchoController(t, controller, v1alpha1.Hook{Webhook: &v1alpha1.Webhook{URL: &url}, Delivery: fastDelivery(3 * time.Second)})
	ns := namespace(t)

	createEcho(t, ns, "good-1", controller, "one", "")
	createEcho(t, ns, "good-2", controller, "two", "")
	eventually(t, time.Minute, func() error { return echoSynced(ctx, ns, "good-1", "python", "one") })
	// What no reply may touch, as it is now.
	bystander, err := env.kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "bystander", Namespace: ns}, Data: map[string]string{"secret": "do-not-touch"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sibling, err := env.kube.CoreV1().ConfigMaps(ns).Get(ctx, "good-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	cases := []struct{ mode, reason, want string }{
		{"undeclared-kind", "InvalidHookReply", `Secret.v1 "undeclared-kind": kind not declared in childResources`},
		{"other-namespace", "InvalidHookReply", `namespace "kube-system" is outside the parent's namespace`},
		{"cluster-scoped", "InvalidHookReply", `ClusterRole.rbac.authorization.k8s.io/v1 "hostile-cluster-scoped": kind not declared`},
		{"take:good-1", "InvalidHookReply", `"good-1": an object of that name exists and is already controlled by Echo good-1`},
		{"take:bystander", "InvalidHookReply", `"bystander": an object of that name exists, is controlled by no one`},
		{"invalid-name", "ApplyFailed", `"Not_A_Valid_Name!" is invalid`},
		{"wrong-types", "InvalidHookReply", "not a valid sync response"},
		{"not-json", "HookFailed", "InvalidReply: reply is not JSON"},
		{"deep", "HookFailed", "InvalidReply: reply is not JSON"},
		{"too-large", "HookFailed", "reply larger than"},
		{"many-children", "InvalidHookReply", "5000 children, more than the 1000 a reply may have"},
		{"timeout", "HookFailed", "Timeout: no reply within 3s"},
		{"drop", "HookFailed", "EOF"},
	}
	for i, tc := range cases {
		createEcho(t, ns, hostileName(tc.mode), controller, fmt.Sprint("hostile ", i), tc.mode)
	}
	// Meanwhile, a good parent takes an edit.
	setEcho(t, ns, "good-2", "two, edited", "")

	for _, tc := range cases {
		t.Run(tc.mode, func(t *testing.T) {
			eventually(t, 2*time.Minute, func() error {
				return syncFailed(ctx, echoGVR, ns, hostileName(tc.mode), tc.reason, tc.want)
			})
		})
	}
	eventually(t, time.Minute, func() error { return echoSynced(ctx, ns, "good-2", "python", "two, edited") })

	// Nothing outside the declaration changed, and no hostile reply was
	// half-applied: the good child each hostile reply lists first was not
	// written.
	for _, before := range []*corev1.ConfigMap{bystander, sibling} {
		assertUntouched(t, before)
	}
	for _, tc := range cases {
		name := hostileName(tc.mode)
		if _, err := env.kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("%s: its ConfigMap exists (err %v): a rejected reply was applied", name, err)
		}
	}
	absent := map[string]error{}
	_, absent["Secret undeclared-kind"] = env.kube.CoreV1().Secrets(ns).Get(ctx, "undeclared-kind", metav1.GetOptions{})
	_, absent["ConfigMap kube-system/other-namespace"] = env.kube.CoreV1().ConfigMaps("kube-system").Get(ctx, "other-namespace", metav1.GetOptions{})
	_, absent["ClusterRole hostile-cluster-scoped"] = env.kube.RbacV1().ClusterRoles().Get(ctx, "hostile-cluster-scoped", metav1.GetOptions{})
	_, absent["ConfigMap many-children-0"] = env.kube.CoreV1().ConfigMaps(ns).Get(ctx, "many-children-0", metav1.GetOptions{})
	for what, err := range absent {
		if !apierrors.IsNotFound(err) {
			t.Errorf("%s: want NotFound, got %v", what, err)
		}
	}
	if err := env.uc.proc.Exited(); err != nil {
		t.Fatalf("uc exited: %v", err)
	}
	if log, err := os.ReadFile(filepath.Join(env.uc.dir, "uc.log")); err != nil || strings.Contains(string(log), "panic") {
		t.Fatalf("uc's log holds a panic (or cannot be read: %v)", err)
	}
}

// hostileName is the name of the Echo whose hook answers in mode.
func hostileName(mode string) string {
	return strings.NewReplacer(":", "-").Replace(mode)
}
