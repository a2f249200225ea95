package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"time"

	"universalcontroller.dev/uc/internal/webhook"
	"universalcontroller.dev/uc/sdk/go/hook"
)

// CallObserver hears of every call the dispatcher makes to a webhook or a
// destination, each try on its own: how it ended (see outcome) and how long it
// took. uc counts them in its metrics.
type CallObserver interface {
	HookCalled(controller, hook, outcome string, took time.Duration)
}

// The outcomes of a call. A hook that answered with a status other than
// 200 is "http_" and the status class, e.g. http_5xx.
const (
	outcomeOK            = "ok"
	outcomeTimeout       = "timeout"
	outcomeUnreachable   = "unreachable"    // no HTTP answer: refused, reset, TLS, DNS
	outcomeInvalidReply  = "invalid_reply"  // a 200 whose body is no reply
	outcomeInvalidConfig = "invalid_config" // the hook's spec cannot be called as it is
)

// outcome is how a call of a hook that returned err ended; ctx is the
// call's.
func outcome(ctx context.Context, err error) string {
	var status *webhook.StatusError
	var e *hook.Error
	switch {
	case err == nil:
		return outcomeOK
	case errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded):
		return outcomeTimeout
	case errors.As(err, &status):
		return fmt.Sprintf("http_%dxx", status.Code/100)
	case errors.As(err, &e) && e.Reason == hook.ReasonInvalidReply:
		return outcomeInvalidReply
	case errors.As(err, &e) && e.Reason == hook.ReasonHTTPError:
		return outcomeUnreachable
	}
	return outcomeInvalidConfig
}

// observedHandler tells obs of every call of its hook.
type observedHandler struct {
	hook.Handler
	controller string
	obs        CallObserver
}

func (h observedHandler) Handle(ctx context.Context, data []byte) (any, error) {
	start := time.Now()
	reply, err := h.Handler.Handle(ctx, data)
	h.obs.HookCalled(h.controller, h.Hook(), outcome(ctx, err), time.Since(start))
	return reply, err
}
