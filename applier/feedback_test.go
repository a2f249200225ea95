package applier

import (
	"log/slog"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	testclock "k8s.io/utils/clock/testing"

	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// TestHookEventCorrelation: hook Events are limited per parent and reason.
// A flood of one identical Warning becomes one Event whose count grows, up
// to the burst of 25, then one more every 5 minutes; meanwhile another
// reason on the same parent, and the same reason on another parent, are
// recorded — which uc's own correlation, per parent alone, would drop.
func TestHookEventCorrelation(t *testing.T) {
	clock := testclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	event := func(parent, reason string) *corev1.Event {
		now := metav1.NewTime(clock.Now())
		return &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: parent + "." + reason, Namespace: "ns"},
			InvolvedObject: corev1.ObjectReference{APIVersion: "example.com/v1", Kind: "Parent", Namespace: "ns", Name: parent, UID: types.UID("uid-" + parent)},
			Reason:         reason, Message: "the disk is full", Type: corev1.EventTypeWarning,
			Source: corev1.EventSource{Component: v1alpha1.HookEventSource}, Count: 1, FirstTimestamp: now, LastTimestamp: now,
		}
	}
	opts := HookEventCorrelation
	opts.Clock = clock
	c := record.NewEventCorrelatorWithOptions(opts)
	recorded := 0
	var last *corev1.Event
	for i := range 40 {
		res, err := c.EventCorrelate(event("p", "DiskFull"))
		if err != nil {
			t.Fatal(err)
		}
		if res.Skip {
			continue
		}
		recorded++
		last = res.Event
		if (res.Patch == nil) != (i == 0) {
			t.Errorf("event %d: patch %s; want a new Event first, then its count raised", i, res.Patch)
		}
	}
	if recorded != 25 || last.Count != 25 {
		t.Errorf("40 identical Events: %d recorded, the last with count %d; want 25, on one Event", recorded, last.Count)
	}
	for _, e := range []*corev1.Event{event("p", "Unreachable"), event("q", "DiskFull")} {
		if res, _ := c.EventCorrelate(e); res.Skip {
			t.Errorf("%s on %s dropped after another reason's flood", e.Reason, e.InvolvedObject.Name)
		}
	}
	if res, _ := c.EventCorrelate(event("p", "DiskFull")); !res.Skip {
		t.Error("the flooded reason recorded again at once")
	}
	clock.Step(5 * time.Minute)
	if res, _ := c.EventCorrelate(event("p", "DiskFull")); res.Skip {
		t.Error("the flooded reason dropped 5 minutes later")
	}

	// uc's own correlation limits a parent's Events whatever their reason.
	own := record.NewEventCorrelatorWithOptions(record.CorrelatorOptions{Clock: clock})
	for range 25 {
		_, _ = own.EventCorrelate(event("p", "DiskFull"))
	}
	if res, _ := own.EventCorrelate(event("p", "Unreachable")); !res.Skip {
		t.Error("uc's own correlation is per reason too: this test shows nothing")
	}
}

// TestRecordHookEvents: each event of a reply is recorded on the parent,
// as it is, by the hooks' recorder, not uc's.
func TestRecordHookEvents(t *testing.T) {
	rec, own := record.NewFakeRecorder(10), record.NewFakeRecorder(10)
	a := New(nil, nil, nil, own, Options{HookEvents: rec}, slog.New(slog.DiscardHandler))
	t.Cleanup(a.in.shutDown)
	a.rec.recordHookEvents(&unstructured.Unstructured{}, []hooks.Event{
		{Type: "Warning", Reason: "DiskFull", Message: "95%"}, {Type: "Normal", Reason: "Scaled"}})
	close(rec.Events)
	var got []string
	for e := range rec.Events {
		got = append(got, e)
	}
	if want := []string{"Warning DiskFull 95%", "Normal Scaled "}; len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("events %q, want %q", got, want)
	}
	if len(own.Events) > 0 {
		t.Errorf("%d events recorded by uc's own recorder", len(own.Events))
	}
}
