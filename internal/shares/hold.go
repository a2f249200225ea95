package shares

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"universalcontroller.dev/uc/internal/verdict"
)

// ErrHoldLost ends the work on a partition this replica may no longer
// hold. It waits (verdict.Wait), no failure: the work is retried in a new
// hold, or done by the replica that holds the partition.
var ErrHoldLost = verdict.Wait.Mark(errors.New("the hold on the partition lapsed"))

// Hold is this replica's hold on one partition. It lasts while the
// partition's key was renewed less than staleAfter ago, and ends when this
// replica may no longer work on the partition: its key was not renewed for
// staleAfter (expiry), a renewal failed, or the partition was released.
// Work in flight then stops, as another replica may take the partition
// once the key expires. A renewal after a lapse starts a new hold: ask for
// Context again rather than keep it.
type Hold struct {
	// rev is the revision of its key; only Run's goroutine reads and
	// writes it.
	rev uint64

	mu sync.Mutex
	// renewed is when the last successful renewal of its key was sent.
	renewed time.Time
	ctx     context.Context
	lapse   context.CancelCauseFunc
	expiry  *time.Timer
}

// NewHold is a hold whose key was created or renewed at sent, as Shares
// hands a Holder: it lasts until staleAfter from then. A Holder's tests
// make their own.
func NewHold(sent time.Time) *Hold {
	h := &Hold{}
	h.extend(sent)
	return h
}

// Context is the hold: it ends, with the cause (ErrHoldLost), when the
// replica may no longer work on the partition.
func (h *Hold) Context() context.Context {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ctx
}

// Err is nil while the hold lasts, or why it ended.
func (h *Hold) Err() error { return context.Cause(h.Context()) }

// WhileHeld is ctx, ended with the hold's cause when the hold ends.
func (h *Hold) WhileHeld(ctx context.Context) (context.Context, context.CancelFunc) {
	hold := h.Context()
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(hold, func() { cancel(context.Cause(hold)) })
	return ctx, func() {
		stop()
		cancel(nil)
	}
}

// Check tells whether this replica may act on the partition now: nil while
// the last renewal of its key was sent less than staleAfter ago, by the
// process's monotonic clock, and the hold did not end; a *Lapsed, or the
// hold's end, otherwise. Unlike the hold's end, which a timer brings, it is
// right after a pause (a long GC, a frozen VM, SIGSTOP), before any timer
// fires: check right before each act that another replica must not make at
// the same time.
func (h *Hold) Check() error { return h.at(time.Now()) }

// at is Check at now.
func (h *Hold) at(now time.Time) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if since := now.Sub(h.renewed); since >= staleAfter {
		return &Lapsed{Until: h.renewed.Add(staleAfter), Since: since}
	}
	return context.Cause(h.ctx)
}

// Lapsed is a hold whose check failed because it was not renewed in time:
// it lapsed at Until, and the acts each made while the check passed were
// all made before then.
type Lapsed struct {
	Until time.Time
	Since time.Duration // since the last renewal, when the check was made
}

func (l *Lapsed) Error() string {
	return fmt.Sprintf("%v: not renewed for %s", ErrHoldLost, l.Since.Round(time.Millisecond))
}

func (l *Lapsed) Unwrap() error { return ErrHoldLost }

// extend records a renewal of the key sent at sent: the partition may be
// worked on until staleAfter from then.
func (h *Hold) extend(sent time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.renewed = sent
	if h.ctx == nil || h.ctx.Err() != nil {
		h.ctx, h.lapse = context.WithCancelCause(context.Background())
	}
	left := staleAfter - time.Since(sent)
	if h.expiry == nil {
		h.expiry = time.AfterFunc(left, h.expire)
	} else {
		h.expiry.Reset(left)
	}
}

// expire ends the hold unless a renewal came in time (the timer may fire
// while extend resets it).
func (h *Hold) expire() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if time.Since(h.renewed) >= staleAfter {
		h.lapse(fmt.Errorf("%w: not renewed for %s", ErrHoldLost, staleAfter))
	}
}

// end ends the hold with cause.
func (h *Hold) end(cause error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.expiry.Stop()
	h.lapse(cause)
}
