package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/schemas/v1alpha1"
	"universalcontroller.dev/uc/sdk/go/hook"
)

// deadLetterReason is the failure reason of the parent's last dead-lettered
// sync request.
func deadLetterReason(ctx context.Context, controller string, parent *unstructured.Unstructured) (string, error) {
	s, err := env.js.Stream(ctx, bus.DeadLetterStream)
	if err != nil {
		return "", err
	}
	addr := bus.Address{Controller: controller, Hook: hooks.Sync, Partition: bus.Partition(parent.GetUID(), bus.DefaultPartitions), ParentUID: parent.GetUID()}
	msg, err := s.GetLastMsgForSubject(ctx, addr.DeadLetterSubject())
	if err != nil {
		return "", fmt.Errorf("dead letter of %s: %w", parent.GetName(), err)
	}
	return msg.Header.Get(hook.HeaderFailureReason), nil
}

// TestDeliveryDeadLetter: a hook that times out, or answers 500, is tried
// maxDeliveries (3) times with a growing backoff; then the request is
// dead-lettered, and the parent gets Synced=False and a Warning Event
// naming the timeout or the status code, while its children stay as they
// are. A later successful sync clears the condition.
func TestDeliveryDeadLetter(t *testing.T) {
	const controller = "delivery-dlq"
	h, srv := newEchoHook(t, controller, plain)
	srv.Start()
	registerEchoController(t, controller, v1alpha1.Hook{Webhook: &v1alpha1.Webhook{URL: &srv.URL}, Delivery: fastDelivery(time.Second)})
	ns := namespace(t)
	for _, tc := range []struct{ mode, reason, want string }{
		{"hang", hook.ReasonTimeout, "will retry: Timeout: no reply within 1s"},
		{"fail", hook.ReasonHTTPError, `will retry: HTTPError: POST ` + srv.URL + `: 500 Internal Server Error: "echo hook is broken"`},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			ctx := t.Context()
			name := "dlq-" + tc.mode
			echo := createEcho(t, ns, name, controller, "v1", "")
			eventually(t, time.Minute, func() error { return echoSynced(ctx, ns, name, controller, "v1") })
			cm, err := env.kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}

			setEcho(t, ns, name, "v2", tc.mode)
			eventually(t, time.Minute, func() error { return hookFailed(ctx, ns, name, tc.want) })
			eventually(t, 10*time.Second, func() error { return deadLettered(ctx, controller, echo, tc.reason) })
			checkRetries(t, h.callsOf(name), tc.mode)
			if got, err := env.kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{}); err != nil || got.ResourceVersion != cm.ResourceVersion {
				t.Fatalf("the failing hook changed the child: %v (err %v)", got.Data, err)
			}

			setEcho(t, ns, name, "v3", "")
			eventually(t, time.Minute, func() error { return echoSynced(ctx, ns, name, controller, "v3") })
		})
	}
}

// TestDeliveryFailureReportedAtOnce: a hook that fails says so on the
// parent at its first failed call — Synced=False/HookFailed and a Warning
// Event, "will retry" — long before its request is dead-lettered (10
// deliveries, 10s apart at least), as Metacontroller reports a SyncError at
// once; the next good reply clears it.
func TestDeliveryFailureReportedAtOnce(t *testing.T) {
	const controller = "delivery-at-once"
	_, srv := newEchoHook(t, controller, plain)
	srv.Start()
	ten := int32(10)
	registerEchoController(t, controller, v1alpha1.Hook{Webhook: &v1alpha1.Webhook{URL: &srv.URL}, Delivery: &v1alpha1.Delivery{
		MaxDeliveries: &ten, BackoffDelay: &metav1.Duration{Duration: 20 * time.Second}}})
	ns := namespace(t)
	ctx := t.Context()
	createEcho(t, ns, "flaky", controller, "v1", "")
	eventually(t, time.Minute, func() error { return echoSynced(ctx, ns, "flaky", controller, "v1") })
	setEcho(t, ns, "flaky", "v2", "fail")
	// The first retry comes 10s or more after the first call: a report
	// within 8s can only be the first call's.
	eventually(t, 8*time.Second, func() error {
		return hookFailed(ctx, ns, "flaky", `sync hook failed, will retry: HTTPError: POST `+srv.URL+`: 500 Internal Server Error`)
	})
	setEcho(t, ns, "flaky", "v3", "")
	eventually(t, time.Minute, func() error { return echoSynced(ctx, ns, "flaky", controller, "v3") })
}

// deadLettered checks that the parent's last dead-lettered sync request
// failed for reason.
func deadLettered(ctx context.Context, controller string, parent *unstructured.Unstructured, reason string) error {
	got, err := deadLetterReason(ctx, controller, parent)
	if err == nil && got != reason {
		err = fmt.Errorf("dead letter reason %q, want %q", got, reason)
	}
	return err
}

// checkRetries checks that the request in mode that was dead-lettered
// after fastDelivery's 3 deliveries had them, each retry after the
// backoff: 200ms, then 400ms, less up to half of it as jitter.
func checkRetries(t *testing.T, calls []echoCall, mode string) {
	t.Helper()
	// The deliveries of the dead-lettered request: a call for the message
	// before (a status event of the last sync) may still come after the
	// spec changed, and the parent's retries after the dead letter carry
	// it as uc's report of the failure left it.
	times := deliveries(calls, mode)
	if len(times) < 3 {
		t.Fatalf("%d calls, want 3 before the dead letter", len(times))
	}
	for i, least := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond} {
		gap := times[i+1].Sub(times[i])
		t.Logf("retry %d came %s after the call before", i+1, gap.Round(time.Millisecond))
		if gap < least {
			t.Errorf("retry %d came %s after the call before, want at least %s", i+1, gap, least)
		}
	}
}

// deliveries are the call times of the request in mode that had the most
// calls: the one that was dead-lettered.
func deliveries(calls []echoCall, mode string) []time.Time {
	byRequest := map[string][]time.Time{} // by the parent's resourceVersion
	var most []time.Time
	for _, c := range calls {
		if c.mode == mode {
			byRequest[c.resourceVersion] = append(byRequest[c.resourceVersion], c.at)
			if times := byRequest[c.resourceVersion]; len(times) > len(most) {
				most = times
			}
		}
	}
	return most
}

// TestDelivery429: a 429 with Retry-After: 2 delays the parent's next call
// by 2s, not by the 200ms backoff.
func TestDelivery429(t *testing.T) {
	const controller = "delivery-429"
	h, srv := newEchoHook(t, controller, plain)
	srv.Start()
	registerEchoController(t, controller, v1alpha1.Hook{Webhook: &v1alpha1.Webhook{URL: &srv.URL}, Delivery: fastDelivery(5 * time.Second)})
	ns := namespace(t)
	createEcho(t, ns, "busy", controller, "hi", "busy")
	eventually(t, time.Minute, func() error { return echoSynced(t.Context(), ns, "busy", controller, "hi") })
	calls := h.callTimes("busy")
	if len(calls) < 2 {
		t.Fatalf("%d calls, want a 429 and a success", len(calls))
	}
	gap := calls[1].Sub(calls[0])
	t.Logf("the call after the 429 came %s later", gap.Round(time.Millisecond))
	if gap < 2*time.Second {
		t.Fatalf("the call after a 429 with Retry-After: 2 came %s later", gap)
	}
}

// TestDeliveryNoBlocking: a hook call that hangs holds one of its hook's
// slots and nothing else: other parents of the same controller are served,
// never more at once than the hook's concurrency (2), and so is another
// controller.
func TestDeliveryNoBlocking(t *testing.T) {
	ctx := t.Context()
	two := int32(2)
	a, srvA := newEchoHook(t, "noblock-a", plain)
	srvA.Start()
	registerEchoController(t, "noblock-a", v1alpha1.Hook{Webhook: &v1alpha1.Webhook{URL: &srvA.URL},
		Delivery: &v1alpha1.Delivery{Timeout: &metav1.Duration{Duration: 5 * time.Minute}, Concurrency: &two}})
	_, srvB := newEchoHook(t, "noblock-b", plain)
	srvB.Start()
	registerEchoController(t, "noblock-b", webhookAt(srvB.URL))
	ns := namespace(t)

	createEcho(t, ns, "stuck", "noblock-a", "waiting", "hang")
	eventually(t, time.Minute, func() error {
		if len(a.callTimes("stuck")) == 0 {
			return fmt.Errorf("the hanging call has not started")
		}
		return nil
	})
	const parents = 4
	for i := range parents {
		createEcho(t, ns, fmt.Sprintf("slow-%d", i), "noblock-a", "done", "slow")
	}
	createEcho(t, ns, "other", "noblock-b", "done", "")
	eventually(t, time.Minute, func() error { return echoSynced(ctx, ns, "other", "noblock-b", "done") })
	eventually(t, time.Minute, func() error {
		for i := range parents {
			if err := echoSynced(ctx, ns, fmt.Sprintf("slow-%d", i), "noblock-a", "done"); err != nil {
				return err
			}
		}
		return nil
	})
	peak := a.peakConcurrency()
	t.Logf("noblock-a: at most %d calls at once", peak)
	if n := len(a.callTimes("stuck")); n != 1 {
		t.Fatalf("the stuck parent had %d calls, want its first still hanging", n)
	}
	if _, err := env.kube.CoreV1().ConfigMaps(ns).Get(ctx, "stuck", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the stuck parent's call should still hang, but it has a child (err %v)", err)
	}
	if peak > 2 {
		t.Fatalf("%d calls at once, over the hook's concurrency of 2", peak)
	}
	a.releaseAll()
	eventually(t, time.Minute, func() error { return echoSynced(ctx, ns, "stuck", "noblock-a", "waiting") })
}
