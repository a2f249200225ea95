package inspect

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
)

// at is the tests' clock: now, and the times of their fixtures.
var at = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// fixedClock sets the clock of verdicts and output to at for one test.
func fixedClock(t *testing.T) {
	t.Helper()
	now = func() time.Time { return at }
	t.Cleanup(func() { now = time.Now })
}

// traceOf is a trace of a selected parent at generation 3 whose sync
// hook's consumer exists with a worker waiting, changed by edit.
func traceOf(edit func(*Trace)) *Trace {
	t := &Trace{Controller: "shop", Selected: true,
		Parent:    Parent{APIVersion: "e2e.universalcontroller.dev/v1", Kind: "Composite", Namespace: "ns", Name: "web", UID: "0b5c", Generation: 3, ResourceVersion: "700"},
		Hooks:     []Hook{{Name: hooks.Sync, Serves: "bus-native workers", Consumer: &Consumer{Name: "hook_shop_sync", Waiting: 1}}},
		Partition: Partition{Number: 7, Holder: "applier-0"},
	}
	if edit != nil {
		edit(t)
	}
	return t
}

func request(generation int64) *Message {
	return &Message{ID: "req", Generation: generation, ResourceVersion: fmt.Sprint(generation * 100), Observation: generation * 10, Time: at.Add(-2 * time.Second), Stored: at.Add(-2 * time.Second)}
}

// plan is a plan of a reply for generation, published 2s ago.
func plan(generation int64, p *bus.Plan) *Message {
	m := request(generation)
	m.Hook, m.RequestID, m.Plan = hooks.Sync, "req", p
	return m
}

// TestVerdict: the verdict looks along the pipeline from its end, and
// names what holds the parent and what to do.
func TestVerdict(t *testing.T) {
	fixedClock(t)
	synced := func(status, reason, message string) func(*Trace) {
		return func(t *Trace) {
			t.Conditions = []Condition{{Type: "Synced", Status: status, Reason: reason, Message: message}}
		}
	}
	deadLetter := &DeadLetter{ID: 42, DeadLettered: at.Add(-time.Minute), Reason: "WorkerError", Message: "boom", Request: &Message{Hook: hooks.Sync, Generation: 3, Observation: 30}}
	for _, tc := range []struct {
		name       string
		edit       func(*Trace)
		state      string
		summary    string // held in the summary
		hint       string // held in the hint ("": none)
		noHintWant bool
	}{
		{name: "not selected", edit: func(t *Trace) { t.Selected = false }, state: NotSelected, summary: "does not select it", hint: "labelSelector"},
		{name: "a reply waits, its partition held", edit: func(t *Trace) { t.Hooks[0].Reply = request(3) },
			state: WaitingForApplier, summary: "a reply for generation 3 waits for the applier of partition 7, since 2s ago, held by applier-0", noHintWant: true},
		{name: "a failure waits, its partition not held", edit: func(t *Trace) {
			t.Hooks[0].Reply = request(3)
			t.Hooks[0].Reply.Failure = &bus.Failure{Reason: "Timeout"}
			t.Partition.Holder = ""
		}, state: WaitingForApplier, summary: "a failure (Timeout)", hint: "no applier holds partition 7"},
		{name: "no consumer", edit: func(t *Trace) { t.Hooks[0].Consumer = nil }, state: NoConsumer, summary: "hook_shop_sync does not exist", hint: "dispatcher"},
		{name: "in the hook", edit: func(t *Trace) { t.Hooks[0].Request, t.Hooks[0].Delivered = request(3), true },
			state: InTheHook, summary: "a worker holds its sync request (generation 3, published 2s ago)", noHintWant: true},
		{name: "in the hook, failing", edit: func(t *Trace) {
			t.Hooks[0].Request, t.Hooks[0].Delivered = request(3), true
			synced("False", "HookFailed", "sync hook failed, will retry: boom")(t)
		}, state: InTheHook, summary: "the last try failed: sync hook failed, will retry: boom", hint: "hook's log"},
		{name: "waiting for a worker, none waits", edit: func(t *Trace) {
			t.Hooks[0].Request = request(3)
			t.Hooks[0].Consumer.Waiting, t.Hooks[0].Consumer.AckPending = 0, 16
		}, state: WaitingForWorker, summary: "waits for a worker", hint: "busy with 16 other requests"},
		{name: "waiting for a worker that is coming", edit: func(t *Trace) { t.Hooks[0].Request = request(3) }, state: WaitingForWorker, summary: "waits for a worker", noHintWant: true},
		{name: "finalizing: the finalize hook's", edit: func(t *Trace) {
			t.Parent.Deleting = true
			t.Hooks = append(t.Hooks, Hook{Name: hooks.Finalize, Consumer: &Consumer{Waiting: 1}, Request: request(3)})
		}, state: WaitingForWorker, summary: "its finalize request"},
		{name: "dead-lettered", edit: func(t *Trace) { t.DeadLetters = []*DeadLetter{deadLetter} },
			state: DeadLettered, summary: "its sync request (generation 3) was dead-lettered 1m0s ago: WorkerError: boom", hint: "uc dlq replay 42"},
		{name: "a superseded dead letter is past", edit: func(t *Trace) {
			d := *deadLetter
			d.Superseded = true
			t.DeadLetters = []*DeadLetter{&d}
			t.Fence = &Fence{Generation: 3, Applied: at.Add(-time.Second)}
		}, state: Synced, summary: "generation 3 was applied 1s ago", noHintWant: true},
		{name: "rejected", edit: synced("False", "InvalidHookReply", "children[0]: kind Secret is not a declared child"),
			state: Rejected, summary: "InvalidHookReply: children[0]: kind Secret", hint: "uc resync composite/web -n ns"},
		{name: "synced", edit: func(t *Trace) { t.Fence = &Fence{Generation: 3, Applied: at.Add(-time.Minute)} }, state: Synced, summary: "generation 3 was applied 1m0s ago", noHintWant: true},
		{name: "behind, nothing on its way, no watcher", edit: func(t *Trace) { t.Fence, t.WatcherProblem = &Fence{Generation: 2}, "no watcher answered" },
			state: NotApplied, summary: "the last reply applied was for generation 2), and nothing is on its way: the watcher did not publish it, or its request was lost (no watcher answered)", hint: "uc resync composite/web -n ns"},
		{name: "never applied, never published", edit: func(t *Trace) { t.Published = &bus.LastPublished{} },
			state: NotApplied, summary: "no reply was applied to it yet), and nothing is on its way: the active watcher has published no request for it", hint: "uc resync"},
		{name: "not published yet", edit: func(t *Trace) { t.Published = &bus.LastPublished{ID: "req-2", Generation: 2} },
			state: NotApplied, summary: "the watcher's last request for it, req-2, was of generation 2: it has not published this one", hint: "uc resync"},
		{name: "dry run, planned", edit: func(t *Trace) {
			t.DryRun, t.Fence = true, &Fence{Generation: 3, Applied: at.Add(-time.Second)}
			t.Plans = []*Message{plan(3, &bus.Plan{Children: []bus.Step{{Action: "create"}, {Action: "create"}, {Action: "delete"}}, Status: map[string]any{}})}
		}, state: Planned, summary: "its last reply (generation 3) was planned 2s ago: 2 create, 1 delete, status written", noHintWant: true},
		{name: "dry run, rejected", edit: func(t *Trace) {
			t.DryRun = true
			t.Plans = []*Message{plan(3, &bus.Plan{Rejected: &bus.Rejected{Reason: "InvalidHookReply", Message: "children[0]: kind not declared"}})}
		}, state: Planned, summary: "would be rejected: InvalidHookReply: children[0]: kind not declared", hint: "fix the hook"},
		{name: "dry run, no plan", edit: func(t *Trace) { t.DryRun = true }, state: Planned, summary: "no plan of its replies is on the bus yet", hint: "uc resync"},
		{name: "dry run, a reply on its way", edit: func(t *Trace) { t.DryRun, t.Hooks[0].Reply = true, request(3) }, state: WaitingForApplier, summary: "a reply for generation 3", noHintWant: true},
		{name: "published, gone", edit: func(t *Trace) {
			t.Published = &bus.LastPublished{ID: "req-3", Generation: 3, Published: at.Add(-time.Minute)}
		},
			state: NotApplied, summary: "published its request req-3 1m0s ago, which is gone", hint: "uc resync"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := verdict(traceOf(tc.edit))
			if v.State != tc.state || !strings.Contains(v.Summary, tc.summary) {
				t.Errorf("verdict %s: %s; want %s holding %q", v.State, v.Summary, tc.state, tc.summary)
			}
			if tc.noHintWant && v.Hint != "" || !strings.Contains(v.Hint, tc.hint) {
				t.Errorf("hint %q, want one holding %q (none: %t)", v.Hint, tc.hint, tc.noHintWant)
			}
		})
	}
}
