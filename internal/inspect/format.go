package inspect

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"universalcontroller.dev/uc/schemas/bus"
)

// The human-readable output of the commands. Each Write* writes one
// result; -o json writes the same values as JSON instead.

// WriteTrace writes a trace for a person.
func WriteTrace(w io.Writer, t *Trace) error {
	p := &printer{w: w}
	p.linef("%s %s (%s, uid %s)", t.Parent.Kind, t.Parent.Key(), t.Parent.APIVersion, t.Parent.UID)
	observed := "no status.observedGeneration"
	if g := t.Parent.ObservedGeneration; g != nil {
		observed = fmt.Sprintf("status.observedGeneration %d", *g)
	}
	p.linef("  generation %d, resourceVersion %s, %s", t.Parent.Generation, t.Parent.ResourceVersion, observed)
	if t.Parent.Deleting {
		p.linef("  being deleted; finalizers: %s", strings.Join(t.Parent.Finalizers, ", "))
	}
	selects := "selects it"
	if !t.Selected {
		selects = "does NOT select it"
	}
	p.linef("controller %s (its labelSelector %s)", t.Controller, selects)
	p.linef("verdict    %s: %s", t.Verdict.State, oneLine(t.Verdict.Summary))
	if t.Verdict.Hint != "" {
		p.linef("           → %s", t.Verdict.Hint)
	}

	p.section("Pipeline")
	published := "no answer from the watcher: " + t.WatcherProblem
	if l := t.Published; l != nil && l.ID == "" {
		published = "nothing since the active watcher became active"
	} else if l != nil {
		published = fmt.Sprintf("%s, %s hook (generation %d, resourceVersion %s, observation %d), %s", l.ID, l.Hook, l.Generation, l.ResourceVersion, l.Observation, ago(l.Published))
	}
	p.linef("  published %s", published)
	for _, h := range t.Hooks {
		p.linef("  %s hook, served by %s", h.Name, h.Serves)
		if c := h.Consumer; c != nil {
			last := "never"
			if c.LastDelivery != nil {
				last = ago(*c.LastDelivery)
			}
			p.linef("    consumer  %s: not delivered %d, unacknowledged %d, workers waiting %d; last delivery %s", c.Name, c.Pending, c.AckPending, c.Waiting, last)
		} else {
			p.linef("    consumer  none: nothing takes this hook's requests")
		}
		request := "none waiting"
		if r := h.Request; r != nil {
			state := "not delivered yet"
			if h.Delivered {
				state = "delivered to a worker, not acknowledged yet"
			}
			request = fmt.Sprintf("%s: %s", describe(r), state)
		}
		p.linef("    request   %s", request)
		reply := "none waiting"
		if r := h.Reply; r != nil {
			reply = describe(r) + fmt.Sprintf(", answering %s, from %s", r.RequestID, r.Source)
			if f := r.Failure; f != nil {
				reply = fmt.Sprintf("a failure after %d deliveries: %s: %s; %s", f.Deliveries, f.Reason, f.Message, reply)
			}
		}
		p.linef("    reply     %s", reply)
	}
	applied, verb := "nothing applied yet", "applied"
	if t.DryRun { // the fence says what was planned
		applied, verb = "nothing planned yet", "planned"
	}
	if f := t.Fence; f != nil {
		applied = fmt.Sprintf("the reply to %s: generation %d, resourceVersion %s, observation %d, %s", f.Request, f.Generation, f.ResourceVersion, f.Observation, ago(f.Applied))
	}
	p.linef("  %-9s %s", verb, applied)
	holder := "held by no applier"
	if t.Partition.Holder != "" {
		holder = "held by " + t.Partition.Holder
	}
	p.linef("  partition %d, %s", t.Partition.Number, holder)

	p.section("Conditions")
	p.table(len(t.Conditions), "TYPE\tSTATUS\tREASON\tGENERATION\tSINCE\tMESSAGE", func(i int) string {
		c := t.Conditions[i]
		gen, since := "-", "-"
		if c.ObservedGeneration != nil {
			gen = fmt.Sprint(*c.ObservedGeneration)
		}
		if c.LastTransition != nil {
			since = ago(*c.LastTransition)
		}
		return strings.Join([]string{c.Type, c.Status, c.Reason, gen, since, c.Message}, "\t")
	})

	p.section("Children")
	if t.ChildrenProblem != "" {
		p.linef("  %s", t.ChildrenProblem)
	}
	p.table(len(t.Children), "KIND\tNAME\tSTATE\tWRITTEN BY UC\tCHANGED SINCE BY OTHERS", func(i int) string {
		c := t.Children[i]
		state, written := c.State, "-"
		if c.Owner != "" {
			state += " (" + c.Owner + ")"
		}
		if c.Deleting {
			state += ", being deleted"
		}
		if c.Written != nil {
			written = ago(*c.Written)
		}
		var drift []string
		for _, d := range c.Drift {
			drift = append(drift, fmt.Sprintf("%s by %s %s", strings.Join(d.Fields, ","), d.Manager, ago(d.Time)))
		}
		return strings.Join([]string{c.Kind + "." + c.APIVersion, Parent{Namespace: c.Namespace, Name: c.Name}.Key(), state, written, orDash(strings.Join(drift, "; "))}, "\t")
	})

	p.section("Events")
	p.table(len(t.Events), "LAST\tTYPE\tREASON\tCOUNT\tMESSAGE", func(i int) string {
		e := t.Events[i]
		return fmt.Sprintf("%s\t%s\t%s\t%d\t%s", ago(e.Last), e.Type, e.Reason, e.Count, e.Message)
	})

	p.section("Dead letters")
	writeDeadLetters(p, t.DeadLetters, false)

	if t.DryRun || len(t.Plans) > 0 {
		p.section("Plans (never applied: a dry-run controller's, a shadow's)")
		if len(t.Plans) == 0 {
			p.linef("  (none)")
		}
		for _, m := range t.Plans {
			writePlan(p, m)
		}
	}
	return p.err
}

// writePlan writes a plan: what the applier would do with one reply.
func writePlan(p *printer, m *Message) {
	p.linef("  %s reply to %s (generation %d, resourceVersion %s), planned %s", m.Hook, m.RequestID, m.Generation, m.ResourceVersion, ago(m.Time))
	plan := m.Plan
	if plan == nil {
		p.linef("    (not a plan)")
		return
	}
	if r := plan.Rejected; r != nil {
		p.linef("    rejected  %s: %s", r.Reason, oneLine(r.Message))
	}
	for _, s := range plan.Children {
		p.linef("    %-9s %s %s", s.Action, s.Kind, Parent{Namespace: s.Namespace, Name: s.Name}.Key())
		for line := range strings.Lines(s.Diff) {
			p.linef("        %s", strings.TrimSuffix(line, "\n"))
		}
	}
	if plan.Status != nil {
		status, _ := json.Marshal(plan.Status)
		p.linef("    status    written: %s", status)
	}
	if plan.Finalizer != "" {
		p.linef("    finalizer %s", plan.Finalizer)
	}
	for _, e := range plan.Events {
		p.linef("    event     %s %s: %s", e.Type, e.Reason, oneLine(e.Message))
	}
	if plan.ResyncAfterSeconds > 0 {
		p.linef("    resync    after %gs", plan.ResyncAfterSeconds)
	}
	if d := plan.ShadowDiff; d != nil {
		writeShadowDiff(p, d)
	}
}

// writeShadowDiff writes how a shadow's reply differs from the sync
// hook's.
func writeShadowDiff(p *printer, d *bus.ShadowDiff) {
	if d.Empty() {
		p.linef("    shadow    the same as the sync hook's reply to %s", d.Request)
		return
	}
	p.linef("    shadow    differs from the sync hook's reply to %s (difference %s):", d.Request, d.Hash)
	if r := d.SyncRejected; r != nil {
		p.linef("      the sync hook's reply would be rejected: %s: %s", r.Reason, oneLine(r.Message))
	}
	if r := d.ShadowRejected; r != nil {
		p.linef("      the shadow's reply would be rejected: %s: %s", r.Reason, oneLine(r.Message))
	}
	for _, c := range d.Added {
		p.linef("      added     %s", c)
	}
	for _, c := range d.Removed {
		p.linef("      removed   %s", c)
	}
	for _, c := range d.Changed {
		p.linef("      changed   %s", c.Child)
		for line := range strings.Lines(c.Diff) {
			p.linef("          %s", strings.TrimSuffix(line, "\n"))
		}
	}
	for _, f := range d.Status {
		p.linef("      status    %s", f)
	}
}

// describe says what a message is about.
func describe(m *Message) string {
	s := fmt.Sprintf("%s (generation %d, resourceVersion %s, observation %d), published %s", m.ID, m.Generation, m.ResourceVersion, m.Observation, ago(m.Time))
	if m.Revision != "" {
		s += ", about revision " + m.Revision
	}
	return s
}

// WriteDeadLetters writes a list of dead letters for a person.
func WriteDeadLetters(w io.Writer, list []*DeadLetter) error {
	p := &printer{w: w}
	writeDeadLetters(p, list, true)
	return p.err
}

func writeDeadLetters(p *printer, list []*DeadLetter, withController bool) {
	header := "ID\tDEAD-LETTERED\tHOOK\tPARENT\tGENERATION\tREASON\tSTATE\tMESSAGE"
	if withController {
		header = "ID\tDEAD-LETTERED\tCONTROLLER\tHOOK\tPARENT\tGENERATION\tREASON\tSTATE\tMESSAGE"
	}
	p.table(len(list), header, func(i int) string {
		d := list[i]
		cols := []string{fmt.Sprint(d.ID), ago(d.DeadLettered)}
		if d.Request == nil {
			return strings.Join(append(cols, "-", "-", "-", "-", "not a uc request", d.Problem), "\t")
		}
		r := d.Request
		if withController {
			cols = append(cols, r.Controller)
		}
		state := "waiting for a replay"
		if d.Superseded {
			state = "superseded"
		}
		return strings.Join(append(cols, r.Hook, r.Key(), fmt.Sprint(r.Generation), d.Reason, state, shorten(d.Message, 80)), "\t")
	})
}

// WriteDeadLetter writes one dead letter, its request's body included.
func WriteDeadLetter(w io.Writer, d *DeadLetter) error {
	p := &printer{w: w}
	p.linef("dead letter %d, dead-lettered %s", d.ID, ago(d.DeadLettered))
	if d.Reason != "" || d.Message != "" {
		p.linef("  failure     %s: %s", d.Reason, d.Message)
	}
	if r := d.Request; r != nil {
		p.linef("  subject     %s", r.Subject)
		p.linef("  parent      %s (uid %s) of %s, %s hook", r.Key(), r.ParentUID, r.Controller, r.Hook)
		p.linef("  request     %s", describe(r))
		if d.Superseded {
			p.linef("  superseded  a reply of this observation or a later one was applied since: replaying it changes nothing")
		} else {
			p.linef("  replay      uc dlq replay %d", d.ID)
		}
	} else {
		p.linef("  not a uc request: %s", d.Problem)
	}
	if len(d.Data) > 0 {
		var pretty bytes.Buffer
		if json.Indent(&pretty, d.Data, "", "  ") != nil {
			pretty.Reset()
			pretty.Write(d.Data)
		}
		p.linef("data:\n%s", pretty.String())
	}
	return p.err
}

// WriteReplayed writes what replays did.
func WriteReplayed(w io.Writer, list []Replayed) error {
	p := &printer{w: w}
	p.table(len(list), "ID\tPARENT\tHOOK\tREPLAYED AS\tNOTE", func(i int) string {
		r := list[i]
		as, note := r.Request, r.Note
		if r.Skipped != "" {
			as, note = "-", "skipped: "+r.Skipped
		}
		return strings.Join([]string{fmt.Sprint(r.ID), orDash(r.Parent), orDash(r.Hook), as, orDash(note)}, "\t")
	})
	return p.err
}

// WriteResynced writes what the watcher answered.
func WriteResynced(w io.Writer, list []Resynced) error {
	p := &printer{w: w}
	p.table(len(list), "CONTROLLER\tPARENT\tRESYNC", func(i int) string {
		r := list[i]
		answer := "queued by the watcher"
		if r.Error != "" {
			answer = "not queued: " + r.Error
		}
		return r.Controller + "\t" + r.Parent + "\t" + answer
	})
	return p.err
}

// printer writes lines and tables, keeping the first error.
type printer struct {
	w   io.Writer
	err error
}

func (p *printer) linef(format string, args ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format+"\n", args...)
	}
}

func (p *printer) section(title string) { p.linef("\n%s", title) }

// table writes n rows under header, tab-separated columns aligned, or
// "(none)".
func (p *printer) table(n int, header string, row func(int) string) {
	if n == 0 {
		p.linef("  (none)")
		return
	}
	tw := tabwriter.NewWriter(p.w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  "+header)
	for i := range n {
		fmt.Fprintln(tw, "  "+oneLine(row(i)))
	}
	if err := tw.Flush(); err != nil && p.err == nil {
		p.err = err
	}
}

// oneLine joins the lines of s with spaces.
func oneLine(s string) string { return strings.ReplaceAll(s, "\n", " ") }

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// shorten cuts s to at most n runes, marking the cut.
func shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
