package core

import (
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// TestCheck: a reply is decoded, checked and planned as the applier
// applies one, and a reply it would reject is a Rejection with the reason
// and message the parent would get.
func TestCheck(t *testing.T) {
	parent := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Parent"}}
	parent.SetNamespace("ns")
	parent.SetName("p")
	parent.SetUID("parent-uid")
	live := fakeLive{
		object("ConfigMap", "ns", "old", nil, "parent-uid"),
		claimable(object("ConfigMap", "ns", "orphan", map[string]any{"k": "1"}, "")),
	}
	cm := func(name string) string {
		return fmt.Sprintf(`{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": %q}, "data": {"k": "1"}}`, name)
	}
	for _, tc := range []struct {
		name    string
		version v1alpha1.HookVersion
		reply   string
		writes  string // verb, event and object of each write
		reason  string
		message string
	}{
		{name: "creates, adopts and deletes", reply: `{"status": {"ok": true}, "children": [` + cm("new") + `,` + cm("orphan") + `]}`,
			writes: "create Created ns/new, apply Adopted ns/orphan, delete Deleted ns/old"},
		{name: "not JSON", reply: `Traceback (most recent call last)`,
			reason: "InvalidHookReply", message: "sync hook reply rejected: not a valid sync response: invalid character 'T'"},
		{name: "v2 replies are strict", version: v1alpha1.HookV2, reply: `{"children": [], "chidlren": []}`,
			reason: "InvalidHookReply", message: `sync hook reply rejected: not a valid sync response: unknown field "chidlren"`},
		{name: "v1 replies are not", reply: `{"children": [], "chidlren": []}`, writes: "delete Deleted ns/old, delete Deleted ns/orphan"},
		{name: "too many children", reply: `{"children": [` + cm("a") + `,` + cm("b") + `,` + cm("c") + `]}`,
			reason: "InvalidHookReply", message: "sync hook reply rejected: 3 children, more than the 2 a reply may have"},
		{name: "an undeclared kind", reply: `{"children": [{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}}]}`,
			reason: "InvalidHookReply", message: `sync hook reply rejected: children[0] Secret.v1 "s": kind not declared in childResources`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctl := testController(v1alpha1.ChildUpdateInPlace)
			ctl.Spec.Hooks.Sync.Hook = v1alpha1.Hook{Version: tc.version}
			checked, err := Check(ctl, parent, hooks.Sync, []byte(tc.reply), 2, live)
			if tc.reason != "" {
				r, ok := err.(*Rejection)
				if !ok || r.Reason != tc.reason || !strings.HasPrefix(r.Message, tc.message) {
					t.Fatalf("err %v, want a rejection %s: %s…", err, tc.reason, tc.message)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var writes []string
			for _, w := range checked.Writes {
				writes = append(writes, fmt.Sprintf("%s %s %s", w.Verb, w.Event, ObjectKey(w.Object)))
			}
			if got := strings.Join(writes, ", "); got != tc.writes {
				t.Errorf("writes %s, want %s", got, tc.writes)
			}
			for _, c := range checked.Response.Children {
				if ref := metav1.GetControllerOf(c); c.GetNamespace() != "ns" || ref == nil || ref.UID != "parent-uid" {
					t.Errorf("child %s/%s is not as the applier writes it: owner %v", c.GetNamespace(), c.GetName(), ref)
				}
			}
		})
	}
}

// TestHookFailed: a failed call is reported as the applier reports the
// failure event the hook's worker publishes.
func TestHookFailed(t *testing.T) {
	for _, tc := range []struct {
		failure bus.Failure
		want    string
	}{
		{bus.Failure{Reason: "WorkerError", Message: "exit status 1", Deliveries: 1, Retrying: true}, "HookFailed: sync hook failed, will retry: WorkerError: exit status 1"},
		{bus.Failure{Reason: "Timeout", Message: "no reply within 1s", Deliveries: 3}, "HookFailed: sync hook failed, will retry: Timeout: no reply within 1s"},
		{bus.Failure{Reason: "InvalidSelector", Message: "no spec.selector"}, "InvalidSelector: no spec.selector"},
	} {
		if got := HookFailed(hooks.Sync, tc.failure).Error(); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
}
