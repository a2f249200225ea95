package inspect

import (
	"bytes"
	"testing"
	"time"

	"universalcontroller.dev/uc/internal/golden"
	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
)

// busyTrace is a trace with something in every part.
func busyTrace() *Trace {
	gen := int64(2)
	written := at.Add(-time.Hour)
	failed := request(3)
	failed.Failure = &bus.Failure{Reason: "Timeout", Message: "no reply within 10s", Deliveries: 10}
	failed.RequestID, failed.Source = "req-2", "/universalcontroller/shop/worker"
	t := traceOf(func(t *Trace) {
		t.Parent.ObservedGeneration = &gen
		t.Published = &bus.LastPublished{ID: "req", Hook: hooks.Sync, Generation: 3, ResourceVersion: "300", Observation: 30, Published: at.Add(-2 * time.Second)}
		t.Hooks[0].Request, t.Hooks[0].Delivered = request(3), true
		t.Hooks[0].Consumer.LastDelivery = &written
		t.Hooks = append(t.Hooks, Hook{Name: hooks.Finalize, Serves: "the dispatcher, calling the webhook http://hook/finalize", Reply: failed})
		t.Fence = &Fence{Observation: 20, Request: "req-1", Generation: 2, ResourceVersion: "600", Applied: at.Add(-time.Minute)}
		t.Conditions = []Condition{{Type: "Synced", Status: "False", Reason: "HookFailed", Message: "sync hook failed,\nwill retry", ObservedGeneration: &gen, LastTransition: &written}}
		t.Children = []Child{
			{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "web", State: Owned, Written: &written,
				Drift: []Change{{Manager: "kubectl-edit", Operation: "Update", Time: at.Add(-time.Second), Fields: []string{"data.a", "data.b"}}}},
			{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "stray", State: OwnedByOther, Owner: "Composite/other", Deleting: true},
		}
		t.Events = []Event{{Type: "Warning", Reason: "HookFailed", Message: "boom", Count: 3, Last: at.Add(-5 * time.Second)}}
		t.DeadLetters = []*DeadLetter{{ID: 7, DeadLettered: at.Add(-2 * time.Hour), Reason: "WorkerError", Message: "boom", Superseded: true,
			Request: &Message{Controller: "shop", Hook: hooks.Sync, Namespace: "ns", Name: "web", Generation: 1}}}
	})
	t.Verdict = verdict(t)
	return t
}

// TestWriteTrace: a trace for a person, every part of it; and one of a
// parent with nothing on the bus.
func TestWriteTrace(t *testing.T) {
	fixedClock(t)
	var out bytes.Buffer
	if err := WriteTrace(&out, busyTrace()); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "trace-busy.txt", out.Bytes())

	quiet := traceOf(func(t *Trace) {
		t.Selected, t.Hooks[0].Consumer = false, nil
		t.WatcherProblem = errNoWatcher.Error()
		t.ChildrenProblem = "the parent has no spec.selector"
	})
	quiet.Verdict = verdict(quiet)
	out.Reset()
	if err := WriteTrace(&out, quiet); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "trace-quiet.txt", out.Bytes())

	dry := traceOf(func(t *Trace) {
		t.DryRun = true
		t.Plans = []*Message{plan(3, &bus.Plan{Hook: hooks.Sync, Children: []bus.Step{
			{Action: "create", Kind: "ConfigMap.v1", Namespace: "ns", Name: "web-a"},
			{Action: "update", Kind: "ConfigMap.v1", Namespace: "ns", Name: "web-b", Diff: "--- live\n+++ desired\n@@ -1 +1 @@\n-v: 1\n+v: 2\n"},
			{Action: "delete", Kind: "Secret.v1", Namespace: "ns", Name: "web-old"}},
			Status: map[string]any{"observedGeneration": 3}, Finalizer: "add",
			Events: []bus.PlanEvent{{Type: "Normal", Reason: "Applied", Message: "Created ConfigMap ns/web-a, Deleted Secret ns/web-old"}}, ResyncAfterSeconds: 30})}
		shadow := plan(3, &bus.Plan{Hook: hooks.SyncShadow, Children: []bus.Step{{Action: "update", Kind: "ConfigMap.v1", Namespace: "ns", Name: "web-a"}},
			ShadowDiff: &bus.ShadowDiff{Request: "req", Hash: "0a1b2c3d4e5f6a7b", Added: []string{"ConfigMap.v1 ns/web-c"}, Removed: []string{"Secret.v1 ns/web-old"},
				Changed: []bus.ChildDiff{{Child: "ConfigMap.v1 ns/web-a", Diff: "--- sync\n+++ sync-shadow\n@@ -1 +1 @@\n-v: 1\n+v: 3\n"}}, Status: []string{"status.replicas"}}})
		shadow.Hook = hooks.SyncShadow
		t.Plans = append(t.Plans, shadow)
	})
	dry.Verdict = verdict(dry)
	out.Reset()
	if err := WriteTrace(&out, dry); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "trace-dryrun.txt", out.Bytes())
}

// TestWriteDeadLetters: the list, one dead letter with its request's body,
// what replays did and what the watcher answered.
func TestWriteDeadLetters(t *testing.T) {
	fixedClock(t)
	d := &DeadLetter{ID: 12, DeadLettered: at.Add(-3 * time.Minute), Reason: "HTTPError", Message: "POST http://hook/sync: 500: " + string(bytes.Repeat([]byte("x"), 100)),
		Request: &Message{Subject: "uc.dlq.shop.sync.7.0b5c", ID: "req-3", Controller: "shop", Hook: hooks.Sync, Namespace: "ns", Name: "web", ParentUID: "0b5c",
			Generation: 3, ResourceVersion: "700", Observation: 30, Time: at.Add(-4 * time.Minute)},
		Data: []byte(`{"parent":{"metadata":{"name":"web"}},"children":{}}`)}
	garbage := &DeadLetter{ID: 13, DeadLettered: at, Problem: "decode event on uc.dlq.x: not a CloudEvent"}
	var out bytes.Buffer
	for _, write := range []func() error{
		func() error { return WriteDeadLetters(&out, []*DeadLetter{d, garbage}) },
		func() error { return WriteDeadLetters(&out, nil) },
		func() error { return WriteDeadLetter(&out, d) },
		func() error { return WriteDeadLetter(&out, garbage) },
		func() error {
			return WriteReplayed(&out, []Replayed{{ID: 12, Parent: "ns/web", Hook: hooks.Sync, Request: "req-3-replay-0a1b2c3d"},
				{ID: 11, Parent: "ns/web", Hook: hooks.Sync, Skipped: skippedOlder}, {ID: 13, Skipped: "not a CloudEvent"}})
		},
		func() error {
			return WriteResynced(&out, []Resynced{{Controller: "shop", Parent: "ns/web"}, {Controller: "shop", Parent: "ns/api", Error: "controller shop is not registered with the watcher"}})
		},
	} {
		if err := write(); err != nil {
			t.Fatal(err)
		}
		out.WriteString("----\n")
	}
	golden.Check(t, "dlq.txt", out.Bytes())
}
