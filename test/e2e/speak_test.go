package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// speakHook is the Python hook of these tests, served by `uc worker`.
const speakHook = "test/e2e/testdata/speak-hook.py"

// hookEvents lists the Events the hooks asked for on the object called name
// in ns, of that reason.
func hookEvents(ctx context.Context, ns, name, reason string) ([]corev1.Event, error) {
	list, err := env.kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: fields.SelectorFromSet(fields.Set{
		"involvedObject.name": name, "reason": reason, "source": v1alpha1.HookEventSource}).String()})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// TestHooksSpeakBack: a Python hook served by `uc worker` speaks back
// through its replies. Its Warning Event is recorded on the Echo, from the
// hook's source; its Ready condition is in the Echo's status, at the
// generation it saw, beside uc's Synced, which stays uc's: a reply that
// sets Synced is rejected. A flood of identical Warnings — sixteen a reply,
// a reply every half second — is one Event whose count stops at the burst
// of 25, and the replies that repeat the same condition write nothing to
// the Echo. The condition's lastTransitionTime moves when its status
// changes, and the condition goes when a reply with a status no longer
// sends it.
func TestHooksSpeakBack(t *testing.T) {
	ctx := t.Context()
	const controller, name = "speak", "talker"
	registerEchoController(t, controller, v1alpha1.Hook{Delivery: fastDelivery(10 * time.Second)})
	calls := t.TempDir() // where the flooding hook counts its calls
	startExecWorker(t, controller, "python3", filepath.Join(env.root, speakHook), calls)
	ns := namespace(t)
	createEcho(t, ns, name, controller, "hello", "warn")
	echo := func() (*unstructured.Unstructured, error) {
		return env.dyn.Resource(echoGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	}

	var ready map[string]any // the Ready condition the hook set first
	if !t.Run("the Event and the condition, beside uc's Synced", func(t *testing.T) {
		eventually(t, time.Minute, func() error {
			if err := echoSynced(ctx, ns, name, "exec", "hello"); err != nil {
				return err
			}
			e, err := echo()
			if err != nil {
				return err
			}
			ready = condition(e, "Ready")
			if ready == nil || ready["status"] != "True" || ready["reason"] != "MessageUp" || ready["message"] != "the message is 'hello'" ||
				ready["observedGeneration"] != e.GetGeneration() || ready["lastTransitionTime"] == nil {
				return fmt.Errorf("Ready condition %v, want True/MessageUp at generation %d", ready, e.GetGeneration())
			}
			if synced := condition(e, "Synced"); synced["reason"] != "Applied" {
				return fmt.Errorf("Synced condition %v, want uc's", synced)
			}
			events, err := hookEvents(ctx, ns, name, "LowDisk")
			if err != nil || len(events) != 1 || events[0].Type != corev1.EventTypeWarning || events[0].Message != "the disk of talker is 95% full" {
				return fmt.Errorf("the hook's LowDisk Events: %v (%v), want one Warning", events, err)
			}
			return nil
		})
	}) {
		return
	}

	if !t.Run("a flood of identical Warnings is one Event", func(t *testing.T) {
		setEcho(t, ns, name, "hello", "flood")
		var flooded *unstructured.Unstructured
		eventually(t, time.Minute, func() error {
			e, err := echo()
			if err != nil {
				return err
			}
			if c := condition(e, "Ready"); c["observedGeneration"] != e.GetGeneration() {
				return fmt.Errorf("Ready condition %v, not yet at generation %d", c, e.GetGeneration())
			}
			flooded = e
			return nil
		})
		floodCalls := func() int {
			b, _ := os.ReadFile(filepath.Join(calls, name))
			return strings.Count(string(b), "\n")
		}
		floodEvent := func() error {
			events, err := hookEvents(ctx, ns, name, "Flood")
			switch {
			case err != nil:
				return err
			case len(events) != 1:
				return fmt.Errorf("%d Flood Events, want them counted on one", len(events))
			case events[0].Count != 25:
				return fmt.Errorf("the Flood Event's count is %d, want the burst of 25", events[0].Count)
			}
			return nil
		}
		eventually(t, time.Minute, func() error {
			if n := floodCalls(); n < 4 {
				return fmt.Errorf("%d flooding replies, want 4 (64 Events asked for)", n)
			}
			return floodEvent()
		})
		consistently(t, 2*time.Second, floodEvent)
		e, err := echo()
		if err != nil {
			t.Fatal(err)
		}
		if e.GetResourceVersion() != flooded.GetResourceVersion() {
			t.Errorf("the replies that repeat the condition wrote the Echo: resourceVersion %s → %s", flooded.GetResourceVersion(), e.GetResourceVersion())
		}
		if c := condition(e, "Ready"); c["lastTransitionTime"] != ready["lastTransitionTime"] {
			t.Errorf("Ready's lastTransitionTime moved from %v to %v without a change of status", ready["lastTransitionTime"], c["lastTransitionTime"])
		}
		t.Logf("%d flooding replies asked for %d Events: one Event, count 25", floodCalls(), 16*floodCalls())
	}) {
		return
	}

	if !t.Run("a change of status moves lastTransitionTime", func(t *testing.T) {
		// A change of status moves lastTransitionTime (at least a second later:
		// the flood took longer than that).
		setEcho(t, ns, name, "down", "")
		eventually(t, time.Minute, func() error {
			if err := echoSynced(ctx, ns, name, "exec", "down"); err != nil {
				return err
			}
			e, err := echo()
			if err != nil {
				return err
			}
			c := condition(e, "Ready")
			if c["status"] != "False" || c["reason"] != "MessageDown" {
				return fmt.Errorf("Ready condition %v, want False/MessageDown", c)
			}
			before, _ := time.Parse(time.RFC3339, fmt.Sprint(ready["lastTransitionTime"]))
			if after, err := time.Parse(time.RFC3339, fmt.Sprint(c["lastTransitionTime"])); err != nil || !after.After(before) {
				return fmt.Errorf("Ready's lastTransitionTime %v, want after %v", c["lastTransitionTime"], ready["lastTransitionTime"])
			}
			return nil
		})
	}) {
		return
	}

	if !t.Run("uc's Synced is not the hook's", func(t *testing.T) {
		setEcho(t, ns, name, "down", "steal")
		eventually(t, time.Minute, func() error {
			return syncFailed(ctx, echoGVR, ns, name, "InvalidHookReply", "conditions[1].type: Forbidden: Synced is uc's own condition")
		})
	}) {
		return
	}

	t.Run("a reply with a status and without the condition drops it", func(t *testing.T) {
		setEcho(t, ns, name, "bye", "quiet")
		eventually(t, time.Minute, func() error {
			if err := echoSynced(ctx, ns, name, "exec", "bye"); err != nil {
				return err
			}
			e, err := echo()
			if err != nil {
				return err
			}
			if c := condition(e, "Ready"); c != nil {
				return fmt.Errorf("Ready condition %v, want it gone", c)
			}
			return nil
		})
	})
}

// noticeGVR is the parent kind of testdata/speak-closed-crd.yaml, whose
// status schema admits no conditions.
var noticeGVR = schema.GroupVersionResource{Group: "speak.e2e.universalcontroller.dev", Version: "v1", Resource: "notices"}

// TestHookConditionsClosedStatus: a parent whose status schema admits no
// conditions gets the hook's status and Events, and no write the apiserver
// refuses: the hook's condition is left out, and a Warning Event says so.
func TestHookConditionsClosedStatus(t *testing.T) {
	ctx := t.Context()
	const controller, name = "speak-closed", "notice"
	installCRD(t, "test/e2e/testdata/speak-closed-crd.yaml", noticeGVR)
	registerEchoControllerHooks(t, controller, v1alpha1.Hooks{}, func(uc *v1alpha1.UniversalController) {
		uc.Spec.ParentResource.ResourceRule = v1alpha1.ResourceRule{APIVersion: noticeGVR.GroupVersion().String(), Resource: noticeGVR.Resource}
	})
	startExecWorker(t, controller, "python3", filepath.Join(env.root, speakHook), t.TempDir())
	ns := namespace(t)
	notice := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": noticeGVR.GroupVersion().String(), "kind": "Notice",
		"metadata": map[string]any{"name": name, "namespace": ns, "labels": map[string]any{echoLabel: controller}},
		"spec":     map[string]any{"message": "hello", "mode": "warn"},
	}}
	if _, err := env.dyn.Resource(noticeGVR).Namespace(ns).Create(ctx, notice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, func() error {
		cm, err := env.kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cm.Data["message"] != "hello" {
			return fmt.Errorf("ConfigMap holds %v", cm.Data)
		}
		n, err := env.dyn.Resource(noticeGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if status := fmt.Sprint(n.Object["status"]); status != "map[message:hello]" {
			return fmt.Errorf("status %s, want the hook's message alone", status)
		}
		if events, err := hookEvents(ctx, ns, name, "LowDisk"); err != nil || len(events) != 1 {
			return fmt.Errorf("the hook's LowDisk Events: %v (%v), want one", events, err)
		}
		return warningEvent(ctx, ns, name, "ConditionsNotWritten", "the hook's conditions Ready are not written")
	})
	for _, refused := range []string{"StatusWriteFailed", "StatusFieldsPruned"} {
		if err := warningEvent(ctx, ns, name, refused, ""); err == nil {
			t.Errorf("a Warning Event %s on the Notice", refused)
		}
	}
}
