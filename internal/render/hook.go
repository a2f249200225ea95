package render

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"universalcontroller.dev/uc/core"
	"universalcontroller.dev/uc/internal/exechook"
	"universalcontroller.dev/uc/internal/webhook"
	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/v1alpha1"
	"universalcontroller.dev/uc/sdk/go/hook"
)

// caller calls a hook once with a request and returns its reply. A call
// that fails is an *core.Rejection that says what the parent would.
type caller func(ctx context.Context, hook string, req any) ([]byte, error)

// caller calls the hooks as uc's workers do: a command as `uc worker`
// runs it, a webhook as the dispatcher calls it, with the timeout and the
// reply's bound of theirs, and reports a failed call as the parent would.
func (in *inputs) caller(opts Options, notes io.Writer) caller {
	return func(ctx context.Context, name string, req any) ([]byte, error) {
		h, err := in.handler(opts, name, notes)
		if err != nil {
			return nil, err
		}
		data, err := json.Marshal(req)
		if err != nil {
			return nil, fmt.Errorf("encode the %s request: %w", name, err)
		}
		timeout := opts.Timeout
		if timeout <= 0 {
			timeout = hook.DefaultPolicy.ForRequest(data, name).Timeout
		}
		reply, err := callAndWait(ctx, h, data, timeout)
		if err != nil {
			reason, _ := hook.ReasonOf(err)
			return nil, core.HookFailed(name, bus.Failure{Reason: reason, Message: err.Error(), Deliveries: 1, Retrying: true})
		}
		if b, ok := reply.([]byte); ok {
			return b, nil
		}
		return json.Marshal(reply)
	}
}

// handlerWait bounds the wait for a handler after its call timed out: the
// command killed, the HTTP request cancelled.
const handlerWait = 5 * time.Second

// callAndWait calls h as a worker does (hook.Call), and waits for it to
// return even when the call timed out, so that the command it ran is
// killed before render exits.
func callAndWait(ctx context.Context, h hook.Handler, data []byte, timeout time.Duration) (any, error) {
	w := &waited{Handler: h, done: make(chan struct{})}
	reply, err := hook.Call(ctx, w, data, timeout)
	select {
	case <-w.done:
	case <-time.After(handlerWait):
	}
	return reply, err
}

// waited is a handler whose return is told on done.
type waited struct {
	hook.Handler
	done chan struct{}
}

func (w *waited) Handle(ctx context.Context, data []byte) (any, error) {
	defer close(w.done)
	return w.Handler.Handle(ctx, data)
}

// handler is how the hook is called: the command of --exec, the webhook of
// --url, or the controller's webhook.
func (in *inputs) handler(opts Options, name string, notes io.Writer) (hook.Handler, error) {
	maxReply := opts.MaxReplyBytes
	if maxReply <= 0 {
		maxReply = exechook.DefaultMaxReplyBytes
	}
	switch {
	case opts.Exec != "":
		return &execHook{Handler: &exechook.Handler{HookName: name, Argv: []string{"sh", "-c", opts.Exec}, MaxReplyBytes: maxReply}, stderr: notes}, nil
	case opts.URL != "":
		return webhook.New(name, &v1alpha1.Webhook{URL: &opts.URL}, nil, nil, maxReply), nil
	}
	spec := in.ctl.Spec.Hooks.Named(name)
	switch {
	case spec == nil:
		return nil, fmt.Errorf("%s has no %s hook", in.ctl.Name, name)
	case spec.Webhook == nil:
		return nil, fmt.Errorf("%s's %s hook is not a webhook: give the command that serves it (--exec) or its URL (--url)", in.ctl.Name, name)
	case in.kube == nil && (!spec.Webhook.Connection.IsZero() || len(in.ctl.Spec.EndpointConfigs) > 0):
		return nil, fmt.Errorf("%s's %s webhook connects with settings that may name Secrets: give its URL (--url) to call it without them, or --kubeconfig to read them", in.ctl.Name, name)
	}
	return webhook.New(name, spec.Webhook, in.ctl.Spec.EndpointConfigs, in.kube, maxReply), nil
}

// execHook runs a command as `uc worker` does, and passes on what it
// writes to its standard error as it is: a hook's debugging output.
type execHook struct {
	*exechook.Handler
	stderr io.Writer
}

func (h *execHook) Handle(ctx context.Context, data []byte) (any, error) {
	reply, stderr, err := h.Run(ctx, data)
	_, _ = h.stderr.Write(stderr)
	if err != nil {
		return nil, err
	}
	return reply, nil
}
