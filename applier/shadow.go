package applier

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/lru"

	"universalcontroller.dev/uc/core"
	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
)

// A sync hook's shadow (spec.hooks.sync.shadow) gets a copy of each sync
// request (see bus.ShadowRequestID), and its replies come to the applier
// of the parent's partition beside the sync hook's. They are never
// applied: each is acknowledged at once and kept until the sync hook's
// reply to the same request has been applied (or planned, or rejected);
// then both are planned, one after the other, against the same observed
// state — the caches as the sync hook's apply left them — and the
// difference is recorded: counted (ShadowObserver), published as the
// shadow's plan with the difference (uc trace shows a parent's last), and
// recorded on the parent as a Normal Event ShadowDiffers, once per
// distinct difference (none for a dry-run controller: it writes nothing).
// A shadow that fails, times out or answers garbage touches neither the
// sync hook's reply nor the parent's conditions: its failure reports are
// counted and logged, a reply that would be rejected is a difference like
// any other.

// ShadowObserver hears how the replies of sync hooks' shadows compare,
// e.g. to count them in metrics.
type ShadowObserver interface {
	// Compared: a shadow's reply was compared with the sync hook's reply
	// to the same request; d is empty when they would do the same.
	Compared(controller string, d *bus.ShadowDiff)
	// ShadowFailed: the shadow failed to reply (a failure report: the
	// reason of its last delivery's failure).
	ShadowFailed(controller, reason string)
	// Unmatched: a reply was dropped without a comparison (reason:
	// UnmatchedNoSyncReply, UnmatchedNoShadowReply, UnmatchedTooMany).
	Unmatched(controller, reason string)
}

// Why a reply was dropped without a comparison.
const (
	// UnmatchedNoSyncReply: the shadow replied, and no reply of the sync
	// hook to the same request was applied within shadowMatchTimeout (the
	// sync hook failed, or a newer request replaced the one answered).
	UnmatchedNoSyncReply = "no-sync-reply"
	// UnmatchedNoShadowReply: the reverse.
	UnmatchedNoShadowReply = "no-shadow-reply"
	// UnmatchedTooMany: maxShadowPending replies already waited.
	UnmatchedTooMany = "too-many"
)

// shadowMatchTimeout is how long a reply waits for its counterpart.
const shadowMatchTimeout = 2 * time.Minute

// maxShadowPending bounds the replies waiting for their counterpart,
// across controllers: each holds its reply's data.
const maxShadowPending = 1000

// shadowDiffsRemembered bounds the parents whose last difference is
// remembered, so that the same one is recorded once.
const shadowDiffsRemembered = 10000

// shadowPair is a sync hook's reply and its shadow's, to the same request.
type shadowPair struct {
	since        time.Time
	controller   string
	sync, shadow *reply
}

// shadows keeps the replies waiting for their counterpart, and the last
// difference recorded on each parent.
type shadows struct {
	mu      sync.Mutex
	pending map[string]*shadowPair // by the sync request's id
	work    chan *shadowPair
	// recorded is the hash of the last difference recorded on each
	// parent, by its UID.
	recorded *lru.Cache
}

func newShadows() *shadows {
	return &shadows{pending: map[string]*shadowPair{}, work: make(chan *shadowPair, 64), recorded: lru.New(shadowDiffsRemembered)}
}

// offer keeps a reply of the sync hook (shadow false) or its shadow to
// the sync request of that id, and returns the pair once it has both; or
// the reason the reply is dropped.
func (s *shadows) offer(request string, r *reply, shadow bool) (*shadowPair, string) {
	kept := *r
	kept.msg = nil // acknowledged, or applied: only its data is kept
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.pending[request]
	if p == nil {
		if len(s.pending) >= maxShadowPending {
			return nil, UnmatchedTooMany
		}
		p = &shadowPair{since: time.Now(), controller: r.meta.Controller}
		s.pending[request] = p
	}
	if shadow {
		p.shadow = &kept
	} else {
		p.sync = &kept
	}
	if p.sync == nil || p.shadow == nil {
		return nil, ""
	}
	delete(s.pending, request)
	return p, ""
}

// expire drops the replies that waited longer than shadowMatchTimeout,
// and tells each to unmatched.
func (s *shadows) expire(now time.Time, unmatched func(controller, reason string)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, p := range s.pending {
		if now.Sub(p.since) < shadowMatchTimeout {
			continue
		}
		delete(s.pending, id)
		if p.sync == nil {
			unmatched(p.controller, UnmatchedNoSyncReply)
		} else {
			unmatched(p.controller, UnmatchedNoShadowReply)
		}
	}
}

// firstRecord tells whether d is not the difference last recorded on the
// parent, and remembers it as the last.
func (s *shadows) firstRecord(uid types.UID, d *bus.ShadowDiff) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if last, ok := s.recorded.Get(uid); ok && last == d.Hash {
		return false
	}
	s.recorded.Add(uid, d.Hash)
	return true
}

// runShadows compares the pairs of replies as they are complete, and drops
// those that waited too long, until ctx ends.
func (rc *reconciler) runShadows(ctx context.Context) {
	tick := time.NewTicker(shadowMatchTimeout / 4)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			rc.shadows.expire(now, rc.shadowObserver.Unmatched)
		case p := <-rc.shadows.work:
			rc.compareShadow(ctx, p)
		}
	}
}

// receiveShadow takes a reply (or failure report) of a sync hook's shadow,
// which is never applied.
func (rc *reconciler) receiveShadow(r *reply) {
	log := rc.log.With(append(r.meta.LogArgs(), "hook", r.meta.Hook, "request", r.meta.RequestID)...)
	if r.typ == bus.FailureType(r.meta.Hook) {
		var f bus.Failure
		if err := json.Unmarshal(r.data, &f); err != nil {
			f.Reason = "Unreadable"
		}
		log.Info("the sync hook's shadow failed", "reason", f.Reason, "message", f.Message, "deliveries", f.Deliveries)
		rc.shadowObserver.ShadowFailed(r.meta.Controller, f.Reason)
		return
	}
	request, ok := bus.ShadowedRequestID(r.meta.RequestID)
	if !ok {
		log.Info("dropping a shadow's reply to a request that is not a copy of a sync request")
		rc.shadowObserver.Unmatched(r.meta.Controller, UnmatchedNoSyncReply)
		return
	}
	rc.offerShadow(request, r, true)
}

// syncReplied offers the sync hook's reply to the shadow's comparison,
// once it was applied (or planned, or rejected), if the controller has a
// shadow.
func (rc *reconciler) syncReplied(ctl *core.Controller, r *reply) {
	if ctl.Shadow() == nil || r.meta.Hook != hooks.Sync || r.typ != bus.ResponseType(hooks.Sync) {
		return
	}
	rc.offerShadow(r.meta.RequestID, r, false)
}

func (rc *reconciler) offerShadow(request string, r *reply, shadow bool) {
	p, dropped := rc.shadows.offer(request, r, shadow)
	switch {
	case dropped != "":
		rc.shadowObserver.Unmatched(r.meta.Controller, dropped)
	case p != nil:
		select {
		case rc.shadows.work <- p:
		default:
			rc.shadowObserver.Unmatched(r.meta.Controller, UnmatchedTooMany)
		}
	}
}

// compareShadow plans both replies of a pair against the same observed
// state and records how the shadow's differs.
func (rc *reconciler) compareShadow(ctx context.Context, p *shadowPair) {
	m := p.sync.meta
	log := rc.log.With(append(m.LogArgs(), "request", m.RequestID)...)
	ctl, ok := rc.reg.Get(m.Controller)
	if !ok || ctl.Shadow() == nil {
		return // no longer shadowed
	}
	ctx, cancel := context.WithTimeout(ctx, applyTimeout)
	defer cancel()
	parent, err := rc.parent(ctx, ctl, m)
	if err != nil || parent == nil {
		log.Debug("no shadow comparison: the parent is gone", "err", err)
		return
	}
	sync, _ := rc.outcomeOf(ctl, parent, p.sync)
	shadow, plan := rc.outcomeOf(ctl, parent, p.shadow)
	plan.ShadowDiff = core.DiffOutcomes(m.RequestID, sync, shadow)
	rc.shadowObserver.Compared(ctl.Name, plan.ShadowDiff)
	if err := rc.publishPlan(ctx, p.shadow.meta, plan); err != nil {
		log.Warn("publish the shadow's plan", "err", err)
	}
	if d := plan.ShadowDiff; !d.Empty() {
		log.Info("the sync hook's shadow differs", "difference", d.Hash, "added", d.Added, "removed", len(d.Removed), "changed", len(d.Changed), "status", d.Status)
		if rc.sinkOf(ctl).writesParent() && rc.shadows.firstRecord(parent.GetUID(), d) {
			rc.events.Event(parent, "Normal", "ShadowDiffers", shadowMessage(d))
		}
	}
}

// outcomeOf decodes and plans a reply of the sync hook or its shadow
// against the live children, as the applier would apply it — as if every
// child were on the parent's latest revision — and writes nothing: what
// it would make of the parent, and its plan.
func (rc *reconciler) outcomeOf(ctl *core.Controller, parent *unstructured.Unstructured, r *reply) (core.Outcome, *bus.Plan) {
	err := checkType(r)
	var resp *hooks.SyncResponse
	if err == nil {
		resp, err = core.DecodeSync(hooks.Sync, r.data, ctl.Spec.Hooks.Named(r.meta.Hook).StrictReplies(), rc.maxChildren)
	}
	var actions []core.Write
	if err == nil {
		actions, err = core.Plan(ctl, parent, resp, rc.reg)
	}
	if err != nil {
		// Said as of the sync hook's, so that both replies rejected alike
		// are no difference.
		reason, problem := core.InvalidReply(hooks.Sync, err)
		p := core.NewPlan(r.meta)
		p.Rejected = &bus.Rejected{Reason: reason, Message: problem.Error()}
		return core.Outcome{Rejected: p.Rejected}, p
	}
	o := core.Outcome{Children: map[string]*unstructured.Unstructured{}, Status: resp.Status, Conditions: resp.Conditions}
	for _, c := range resp.Children {
		o.Children[core.ChildKey(c)] = c
	}
	return o, core.Describe(ctl, parent, r.meta, resp, actions, core.ReplyConditions(resp, r.meta.Generation), rc.reg.StatusSchema(ctl.Parent), rc.reg)
}

// shadowMessage is the message of the Event that records a difference.
func shadowMessage(d *bus.ShadowDiff) string {
	var parts []string
	if r := d.SyncRejected; r != nil {
		parts = append(parts, "the sync hook's reply would be rejected: "+r.Message)
	}
	if r := d.ShadowRejected; r != nil {
		parts = append(parts, "the shadow's reply would be rejected: "+r.Message)
	}
	list := func(what string, keys []string) {
		if len(keys) > 0 {
			parts = append(parts, what+" "+strings.Join(keys, ", "))
		}
	}
	list("it adds", d.Added)
	list("it removes", d.Removed)
	var changed []string
	for _, c := range d.Changed {
		changed = append(changed, c.Child)
	}
	list("it changes", changed)
	list("it sets otherwise", d.Status)
	msg := fmt.Sprintf("the sync hook's shadow answers request %s otherwise (difference %s): %s", d.Request, d.Hash, strings.Join(parts, "; "))
	if len(msg) > core.MaxEventMessage {
		msg = strings.ToValidUTF8(msg[:core.MaxEventMessage], "") + "…"
	}
	return msg
}

func (nobody) Compared(string, *bus.ShadowDiff) {}
func (nobody) ShadowFailed(string, string)      {}
func (nobody) Unmatched(string, string)         {}
