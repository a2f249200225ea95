package hook

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"time"
)

// Policy is how one hook's requests are delivered: how long one call may
// take, how many times a request is tried before it is dead-lettered, and
// how long to wait between two tries.
type Policy struct {
	Timeout       time.Duration
	MaxDeliveries int
	// BackoffDelay is the delay before the first retry. It doubles with every
	// retry, up to MaxBackoffDelay.
	BackoffDelay    time.Duration
	MaxBackoffDelay time.Duration
}

// DefaultPolicy is the policy of a hook whose controller sets none.
var DefaultPolicy = Policy{Timeout: 10 * time.Second, MaxDeliveries: 10, BackoffDelay: time.Second, MaxBackoffDelay: time.Minute}

// ForRequest is p overridden by the delivery spec of the hook in the
// request's controller (spec.hooks.<hook>.delivery, and webhook.timeout;
// spec.hooks.sync.shadow's for the hook sync-shadow),
// so a controller's settings reach every worker of its hooks, however they
// are deployed. A request that is not JSON keeps p: the handler fails on
// it and reports why.
func (p Policy) ForRequest(data []byte, hook string) Policy {
	var req struct {
		Controller struct {
			Spec struct {
				Hooks map[string]*hookSpec `json:"hooks"`
			} `json:"spec"`
		} `json:"controller"`
	}
	if err := json.Unmarshal(data, &req); err != nil {
		return p
	}
	h := req.Controller.Spec.Hooks[hook]
	if sync := req.Controller.Spec.Hooks[syncHook]; hook == syncShadowHook && sync != nil {
		h = sync.Shadow // spec.hooks.sync.shadow
	}
	if h == nil {
		return p
	}
	if d := h.Delivery; d != nil {
		setDuration(&p.Timeout, d.Timeout)
		setDuration(&p.BackoffDelay, d.BackoffDelay)
		setDuration(&p.MaxBackoffDelay, d.MaxBackoffDelay)
		if d.MaxDeliveries > 0 {
			p.MaxDeliveries = d.MaxDeliveries
		}
	}
	if h.Webhook != nil {
		setDuration(&p.Timeout, h.Webhook.Timeout)
	}
	return p
}

// ForRetry is p for a request that is a retry: one whose parent's
// requests failed failures times in a row before it (bus.Meta.Failures). A
// retry is tried once — uc's backoff across a parent's requests spaces the
// calls of a hook that keeps failing — and dead-lettered when it fails.
func (p Policy) ForRetry(failures int) Policy {
	if failures > 0 {
		p.MaxDeliveries = 1
	}
	return p
}

// hookSpec is what a worker reads of a UniversalController's hook: the
// fields of its delivery, and the webhook's timeout, which wins over the
// delivery's.
type hookSpec struct {
	Delivery *struct {
		Timeout         duration `json:"timeout"`
		MaxDeliveries   int      `json:"maxDeliveries"`
		BackoffDelay    duration `json:"backoffDelay"`
		MaxBackoffDelay duration `json:"maxBackoffDelay"`
	} `json:"delivery"`
	Webhook *struct {
		Timeout duration `json:"timeout"`
	} `json:"webhook"`
	// Shadow is the sync hook's shadow, served as the hook sync-shadow.
	Shadow *hookSpec `json:"shadow"`
}

// duration is a duration as the Kubernetes API writes one: a string such as
// "1m30s".
type duration time.Duration

func (d *duration) UnmarshalJSON(data []byte) error {
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return err
	}
	parsed, err := time.ParseDuration(s)
	*d = duration(parsed)
	return err
}

func setDuration(dst *time.Duration, src duration) {
	if src > 0 {
		*dst = time.Duration(src)
	}
}

// Backoff is the delay after the n-th delivery (n ≥ 1) failed:
// BackoffDelay·2ⁿ⁻¹, capped at MaxBackoffDelay, less a random part of up to
// its half (jitter) that r, in [0, 1), picks.
func (p Policy) Backoff(n int, r float64) time.Duration {
	d := p.BackoffDelay
	for i := 1; i < n && d > 0 && d < p.MaxBackoffDelay; i++ {
		d *= 2
	}
	d = min(d, p.MaxBackoffDelay)
	return d - time.Duration(r*float64(d/2))
}

func (p Policy) jitteredBackoff(n int) time.Duration { return p.Backoff(n, rand.Float64()) }

// The reasons a call fails, as bus.Failure reports them.
const (
	ReasonTimeout      = "Timeout"
	ReasonHTTPError    = "HTTPError"
	ReasonInvalidReply = "InvalidReply"
	ReasonWorkerError  = "WorkerError"
)

// Error is a failed call that says why. A handler returns one to name the
// reason reported on the parent, or to set the delay before the next try
// (a 429's Retry-After). Any other error is a WorkerError, or a Timeout when
// the call ran out of time.
type Error struct {
	Reason string
	// RetryAfter, when positive, replaces the backoff before the next try,
	// and no request of the same parent is tried before it has passed.
	RetryAfter time.Duration
	Err        error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// ReasonOf classifies a failed call: the reason a bus.Failure reports,
// and how long the hook asked to wait before the next try.
func ReasonOf(err error) (reason string, retryAfter time.Duration) {
	var e *Error
	switch {
	case errors.As(err, &e):
		return e.Reason, e.RetryAfter
	case errors.Is(err, context.DeadlineExceeded):
		return ReasonTimeout, 0
	default:
		return ReasonWorkerError, 0
	}
}
