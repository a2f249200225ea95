package watcher

import (
	"context"
	"time"

	"github.com/nats-io/nats.go"

	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/schemas/v1alpha1"
	"universalcontroller.dev/uc/sdk/go/hook"
)

// onDeadLetter hears that a request was dead-lettered: its hook failed
// every delivery. The parent's retry is due after its backoff (see
// republisher). A core NATS message, heard while it passes: one missed is
// found later, when the request is looked for.
func (w *Watcher) onDeadLetter(msg *nats.Msg) {
	e, err := bus.FromMsg(context.Background(), msg.Subject, msg.Header, msg.Data)
	if err != nil {
		w.log.Debug("not a dead-lettered request", "subject", msg.Subject, "err", err)
		return
	}
	meta, err := bus.MetaOf(e)
	if err != nil || meta.Revision != "" || meta.Hook == hooks.SyncShadow {
		return // not a request the watcher follows
	}
	w.republish.failed(keyOf(meta), e.ID(), time.Now())
}

// firstRetry is how long a parent waits for its first retry once its
// request to the controller's hook failed (see firstRetryOf). A controller
// the watcher does not know has the default delivery policy's.
func (w *Watcher) firstRetry(controller, hookName string) time.Duration {
	var h *v1alpha1.Hook
	if ctl, ok := w.reg.Get(controller); ok {
		h = ctl.Spec.Hooks.Named(hookName)
	}
	return firstRetryOf(h)
}

// firstRetryOf is how long a parent waits for its first retry once its
// request to hook h (nil: a hook without a delivery policy) failed: as
// long as the hook's delivery policy would have waited after its last
// delivery (hook.Policy.Backoff), and at least minFirstRetry, so the gaps
// between the calls go on growing.
func firstRetryOf(h *v1alpha1.Hook) time.Duration {
	p := hook.DefaultPolicy
	if h != nil && h.Delivery != nil {
		d := h.Delivery
		if d.MaxDeliveries != nil && *d.MaxDeliveries > 0 {
			p.MaxDeliveries = int(*d.MaxDeliveries)
		}
		if d.BackoffDelay != nil && d.BackoffDelay.Duration > 0 {
			p.BackoffDelay = d.BackoffDelay.Duration
		}
		if d.MaxBackoffDelay != nil && d.MaxBackoffDelay.Duration > 0 {
			p.MaxBackoffDelay = d.MaxBackoffDelay.Duration
		}
	}
	return max(p.Backoff(p.MaxDeliveries, 0), minFirstRetry)
}
