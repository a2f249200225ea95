package inspect

import (
	"fmt"
	"strings"
	"time"

	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// Verdict says in a line where a parent is along the pipeline, and what to
// do about it.
type Verdict struct {
	State   string `json:"state"`
	Summary string `json:"summary"`
	// Hint is what to do, when something is to be done.
	Hint string `json:"hint,omitempty"`
}

// The states of a parent, in the order verdict looks for them.
const (
	// NotSelected: the controller's labelSelector does not select it.
	NotSelected = "not-selected"
	// WaitingForApplier: a reply (or a failure) is on its way to it.
	WaitingForApplier = "waiting-for-the-applier"
	// NoConsumer: the hook's consumer does not exist; nothing serves it.
	NoConsumer = "no-consumer"
	// InTheHook: a worker holds its request: serves it, or waits to retry.
	InTheHook = "in-the-hook"
	// WaitingForWorker: its request waits for a worker to take it.
	WaitingForWorker = "waiting-for-a-worker"
	// DeadLettered: no hook could serve its last request.
	DeadLettered = "dead-lettered"
	// Rejected: its last reply was rejected, or its hook failed.
	Rejected = "rejected"
	// Synced: its generation was applied and nothing is on its way.
	Synced = "synced"
	// NotApplied: its generation was not applied and nothing is on its way.
	NotApplied = "not-applied"
	// Planned: its controller runs dry (spec.dryRun): its replies are
	// planned, never applied, and nothing is on its way.
	Planned = "planned"
)

// verdict tells where the traced parent is, looking along the pipeline
// from its end: what is on its way to the applier, then to a worker, then
// what the last attempts left.
func verdict(t *Trace) Verdict {
	hook := t.activeHook()
	resync := fmt.Sprintf("uc resync %s", t.command())
	switch {
	case !t.Selected:
		return Verdict{NotSelected, fmt.Sprintf("%s's parentResource.labelSelector does not select it: it gets no hook requests", t.Controller),
			"label it as the controller's labelSelector asks, or trace it for the controller that selects it"}
	case hook.Reply != nil:
		return waitingForApplier(t, hook.Reply)
	case hook.Consumer == nil:
		return Verdict{NoConsumer, fmt.Sprintf("the %s hook's consumer %s does not exist: nothing takes its requests", hook.Name, bus.HookConsumer(t.Controller, hook.Name)),
			"is uc's dispatcher running (uc run, or uc dispatcher), and is the controller registered (kubectl get uc " + t.Controller + ")?"}
	case hook.Request != nil && hook.Delivered:
		v := Verdict{InTheHook, fmt.Sprintf("a worker holds its %s request (generation %d, published %s): it serves it, or waits to try it again", hook.Name, hook.Request.Generation, ago(hook.Request.Time)), ""}
		if c := t.condition(v1alpha1.ConditionSynced); c != nil && c.Status == "False" && c.Reason == v1alpha1.ReasonHookFailed {
			v.Summary += "; the last try failed: " + c.Message
			v.Hint = "see the hook's log; the request is tried again, then dead-lettered"
		}
		return v
	case hook.Request != nil:
		v := Verdict{WaitingForWorker, fmt.Sprintf("its %s request (generation %d, published %s) waits for a worker", hook.Name, hook.Request.Generation, ago(hook.Request.Time)), ""}
		if hook.Consumer.Waiting == 0 {
			v.Hint = fmt.Sprintf("no worker is waiting for requests on %s: start one (%s), or it is busy with %d other requests", hook.Consumer.Name, hook.Serves, hook.Consumer.AckPending)
		}
		return v
	}
	if d := t.deadLetter(); d != nil {
		return Verdict{DeadLettered, fmt.Sprintf("its %s request (generation %d) was dead-lettered %s: %s: %s", d.Request.Hook, d.Request.Generation, ago(d.DeadLettered), d.Reason, d.Message),
			fmt.Sprintf("fix the hook, then: uc dlq replay %d", d.ID)}
	}
	if t.DryRun {
		return planned(t)
	}
	synced := t.condition(v1alpha1.ConditionSynced)
	applied := t.Fence != nil && t.Fence.Generation >= t.Parent.Generation
	switch {
	case synced != nil && synced.Status == "False":
		return Verdict{Rejected, fmt.Sprintf("its last reply was not applied: %s: %s", synced.Reason, synced.Message),
			"fix the hook or what it asks for; " + resync + " asks for a new reply now"}
	case applied:
		return Verdict{Synced, fmt.Sprintf("generation %d was applied %s; nothing is on its way", t.Fence.Generation, ago(t.Fence.Applied)), ""}
	}
	fence := "no reply was applied to it yet"
	if t.Fence != nil {
		fence = fmt.Sprintf("the last reply applied was for generation %d", t.Fence.Generation)
	}
	return Verdict{NotApplied, fmt.Sprintf("generation %d was not applied (%s), and nothing is on its way: %s", t.Parent.Generation, fence, t.unpublished()),
		resync + " asks the watcher for a request now"}
}

// unpublished says what the watcher says of a parent whose generation is
// neither on its way nor applied.
func (t *Trace) unpublished() string {
	p := t.Published
	switch {
	case p == nil:
		return "the watcher did not publish it, or its request was lost (" + t.WatcherProblem + ")"
	case p.ID == "":
		return "the active watcher has published no request for it since it became active"
	case p.Generation < t.Parent.Generation:
		return fmt.Sprintf("the watcher's last request for it, %s, was of generation %d: it has not published this one (its cache may be behind)", p.ID, p.Generation)
	}
	return fmt.Sprintf("the watcher published its request %s %s, which is gone: lost, or answered and rejected (the watcher publishes it again within minutes)", p.ID, ago(p.Published))
}

// planned is the verdict of a dry-run controller's parent with nothing on
// its way: what its last plan says.
func planned(t *Trace) Verdict {
	var last *Message
	for _, m := range t.Plans {
		if m.Plan != nil && m.Hook != hooks.SyncShadow && (last == nil || m.Observation > last.Observation) {
			last = m
		}
	}
	const nothing = "its controller runs dry (spec.dryRun): uc writes nothing to the cluster"
	switch {
	case last == nil:
		return Verdict{Planned, nothing + "; no plan of its replies is on the bus yet (plans are kept a day)", "uc resync " + t.command() + " asks for a new reply, and plan, now"}
	case last.Plan.Rejected != nil:
		return Verdict{Planned, fmt.Sprintf("%s; its last reply (generation %d, planned %s) would be rejected: %s: %s", nothing, last.Generation, ago(last.Time),
			last.Plan.Rejected.Reason, last.Plan.Rejected.Message), "fix the hook; the plan shows what it would do"}
	}
	return Verdict{Planned, fmt.Sprintf("%s; its last reply (generation %d) was planned %s: %s", nothing, last.Generation, ago(last.Time), summary(last.Plan)), ""}
}

// summary counts what a plan does: "2 create, 1 update, status written".
func summary(p *bus.Plan) string {
	var parts []string
	counted := map[string]int{}
	for _, s := range p.Children {
		if counted[s.Action] == 0 {
			parts = append(parts, s.Action)
		}
		counted[s.Action]++
	}
	for i, action := range parts {
		parts[i] = fmt.Sprintf("%d %s", counted[action], action)
	}
	if p.Status != nil {
		parts = append(parts, "status written")
	}
	if p.Finalizer != "" {
		parts = append(parts, "finalizer "+p.Finalizer)
	}
	if len(parts) == 0 {
		return "nothing to do"
	}
	return strings.Join(parts, ", ")
}

// waitingForApplier is the verdict of a parent whose reply waits for the
// applier of its partition.
func waitingForApplier(t *Trace, reply *Message) Verdict {
	what := "a reply"
	if reply.Failure != nil {
		what = "a failure (" + reply.Failure.Reason + ")"
	}
	v := Verdict{WaitingForApplier, fmt.Sprintf("%s for generation %d waits for the applier of partition %d, since %s", what, reply.Generation, t.Partition.Number, ago(reply.Stored)), ""}
	if t.Partition.Holder == "" {
		v.Hint = fmt.Sprintf("no applier holds partition %d: is an applier running (uc run, or uc applier)?", t.Partition.Number)
	} else {
		v.Summary += ", held by " + t.Partition.Holder
	}
	return v
}

// activeHook is the hook that serves the parent now: finalize while it is
// deleted (if the controller has one), else sync, which every controller
// has.
func (t *Trace) activeHook() *Hook {
	want := hooks.Sync
	if t.Parent.Deleting && t.hook(hooks.Finalize) != nil {
		want = hooks.Finalize
	}
	return t.hook(want)
}

func (t *Trace) hook(name string) *Hook {
	for i := range t.Hooks {
		if t.Hooks[i].Name == name {
			return &t.Hooks[i]
		}
	}
	return nil
}

// deadLetter is the parent's latest dead letter that is not superseded, or
// nil; a shadow's never holds the parent.
func (t *Trace) deadLetter() *DeadLetter {
	var latest *DeadLetter
	for _, d := range t.DeadLetters {
		if d.Request != nil && d.Request.Hook != hooks.SyncShadow && !d.Superseded && (latest == nil || d.Request.Observation >= latest.Request.Observation) {
			latest = d
		}
	}
	return latest
}

// command names the parent on uc's command line.
func (t *Trace) command() string {
	s := strings.ToLower(t.Parent.Kind) + "/" + t.Parent.Name
	if t.Parent.Namespace != "" {
		s += " -n " + t.Parent.Namespace
	}
	return s
}

// now is the clock of the "… ago" in verdicts; tests set it.
var now = time.Now

// ago says how long ago at was, in whole seconds (or "at <time>" for
// more than a day).
func ago(at time.Time) string {
	d := now().Sub(at)
	if d > 24*time.Hour {
		return "at " + at.UTC().Format(time.RFC3339)
	}
	return d.Round(time.Second).String() + " ago"
}
