// Package exechook serves a hook with any executable: each request runs the
// command once, with the request JSON on its standard input — exactly
// Metacontroller's, as a webhook gets it — and the reply JSON is what the
// command writes to its standard output. It is what `uc worker -- COMMAND`
// serves with hook.Serve, so a hook in any language needs no NATS client.
//
// A run is bounded: the command runs in a process group of its own, killed
// at the call's timeout, when the command writes more than MaxReplyBytes, and
// when it exits, so nothing it started outlives the call. A non-zero exit, a
// timeout, a reply too large or no reply at all fails the call; what the
// command wrote to its standard error is logged, and its end quoted in the
// failure. The command's environment names the hook it serves
// (hook.ExecHookEnv): a Go worker built with hook.Main serves it. A
// reply that is not JSON is passed on as it is: the applier
// rejects it as any invalid reply, naming the problem on the parent. A
// command asks for a hold-off, as a webhook does with a 429, by exiting with
// ExitTempFail.
package exechook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"universalcontroller.dev/uc/internal/tracing"
	"universalcontroller.dev/uc/sdk/go/hook"
)

// DefaultMaxReplyBytes is the largest reply read when Handler sets none:
// the max payload of uc run's embedded NATS server.
const DefaultMaxReplyBytes = 8 << 20

// ExitTempFail is the exit status (sysexits.h's EX_TEMPFAIL) by which a
// command says "not now", as a webhook's 429 does: no request of this
// parent is tried again before the number of seconds it wrote to its
// standard output has passed (or the usual backoff, when it wrote none).
const ExitTempFail = 75

const (
	// stderrKept is how much of the end of a command's standard error is
	// kept for the log.
	stderrKept = 64 << 10
	// stderrQuoted is how much of it a failure's message quotes.
	stderrQuoted = 300
	// waitDelay is how long the pipes are waited for once the command has
	// exited or been killed: a process it started may hold them open.
	waitDelay = time.Second
)

// Handler serves one hook by running a command per request.
type Handler struct {
	// HookName is the hook served: hooks.Sync, hooks.Finalize or
	// hooks.Customize.
	HookName string
	// Argv is the command and its arguments; Argv[0] is looked up in PATH.
	Argv []string
	// MaxReplyBytes bounds the reply (0: DefaultMaxReplyBytes). A command
	// that writes more is killed and the call fails as an InvalidReply.
	MaxReplyBytes int64
}

// Hook is the hook served.
func (h *Handler) Hook() string { return h.HookName }

// Handle runs the command with the request and returns its reply as it is,
// in a span under the call's. What the command wrote to its standard error
// is logged with the call's logger (hook.Logger).
func (h *Handler) Handle(ctx context.Context, data []byte) (any, error) {
	ctx, span := trace.SpanFromContext(ctx).TracerProvider().Tracer(tracing.Scope).Start(ctx, "exec")
	tracing.SetAttributes(span, func() []attribute.KeyValue {
		return []attribute.KeyValue{attribute.String("process.command_line", h.name())}
	})
	reply, stderr, err := h.Run(ctx, data)
	tracing.End(span, err)
	if len(stderr) > 0 {
		log := hook.Logger(ctx).With("stderr", string(stderr))
		if err != nil {
			log.Warn("hook command failed", "err", err)
		} else {
			log.Info("hook command wrote to its standard error")
		}
	}
	if err != nil {
		return nil, err
	}
	return reply, nil
}

// Run runs the command once with stdin as its standard input, and returns
// what it wrote to its standard output and the end of its standard error.
// The command runs in a process group of its own, killed when ctx ends or
// the reply is too large, and after the command exits, so nothing it
// started outlives the call.
func (h *Handler) Run(ctx context.Context, stdin []byte) (stdout, stderr []byte, err error) {
	if len(h.Argv) == 0 {
		return nil, nil, errors.New("no command")
	}
	runCtx, kill := context.WithCancel(ctx)
	defer kill()
	limit := h.MaxReplyBytes
	if limit <= 0 {
		limit = DefaultMaxReplyBytes
	}
	out := &cappedBuffer{limit: limit, full: kill}
	errOut := &tailBuffer{keep: stderrKept}
	cmd := exec.CommandContext(runCtx, h.Argv[0], h.Argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(stdin), out, errOut
	cmd.Env = append(os.Environ(), hook.ExecHookEnv+"="+h.HookName)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return killGroup(cmd.Process) }
	cmd.WaitDelay = waitDelay
	err = cmd.Run()
	if cmd.Process != nil {
		_ = killGroup(cmd.Process) // what it left running
	}
	stderr = errOut.bytes()
	var exit *exec.ExitError
	switch {
	case out.exceeded:
		return nil, stderr, &hook.Error{Reason: hook.ReasonInvalidReply,
			Err: fmt.Errorf("%s: reply larger than %d bytes: killed%s", h.name(), limit, quote(stderr))}
	case err == nil && len(bytes.TrimSpace(out.b.Bytes())) == 0:
		return nil, stderr, &hook.Error{Reason: hook.ReasonInvalidReply,
			Err: fmt.Errorf("%s wrote no reply on its standard output%s", h.name(), quote(stderr))}
	case err == nil:
		return out.b.Bytes(), stderr, nil
	case ctx.Err() != nil:
		return nil, stderr, fmt.Errorf("%s: killed: %w%s", h.name(), context.Cause(ctx), quote(stderr))
	case errors.As(err, &exit) && exit.ExitCode() == ExitTempFail:
		return nil, stderr, &hook.Error{Reason: hook.ReasonWorkerError, RetryAfter: seconds(out.b.Bytes()),
			Err: fmt.Errorf("%s asked to be called later (exit status %d)%s", h.name(), ExitTempFail, quote(stderr))}
	case errors.Is(err, exec.ErrWaitDelay):
		return nil, stderr, fmt.Errorf("%s exited, but a process it started kept its standard output open%s", h.name(), quote(stderr))
	default:
		return nil, stderr, fmt.Errorf("%s: %w%s", h.name(), err, quote(stderr))
	}
}

// name is the command line, for messages.
func (h *Handler) name() string { return strings.Join(h.Argv, " ") }

// killGroup kills the process group p leads. A group already gone is no
// error.
func killGroup(p *os.Process) error {
	if err := syscall.Kill(-p.Pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}

// seconds reads a delay in seconds; anything else is 0.
func seconds(b []byte) time.Duration {
	s, err := strconv.ParseFloat(strings.TrimSpace(string(b)), 64)
	if err != nil || s <= 0 {
		return 0
	}
	return time.Duration(s * float64(time.Second))
}

// quote quotes the end of a standard error for a failure's message: its
// last lines say what went wrong.
func quote(stderr []byte) string {
	s := strings.TrimSpace(string(stderr))
	if s == "" {
		return ""
	}
	if len(s) > stderrQuoted {
		s = s[len(s)-stderrQuoted:]
		for !utf8.ValidString(s) {
			s = s[1:]
		}
		s = "…" + s
	}
	return ": stderr: " + strconv.Quote(s)
}

// cappedBuffer takes up to limit bytes; a write beyond fails, and calls full.
type cappedBuffer struct {
	b        bytes.Buffer
	limit    int64
	full     func()
	exceeded bool
}

var errReplyTooLarge = errors.New("reply too large")

func (c *cappedBuffer) Write(p []byte) (int, error) {
	if int64(c.b.Len()+len(p)) > c.limit {
		c.exceeded = true
		c.full()
		return 0, errReplyTooLarge
	}
	return c.b.Write(p)
}

// tailBuffer keeps the last keep bytes written to it.
type tailBuffer struct {
	b    []byte
	keep int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > 2*t.keep {
		t.b = append(t.b[:0], t.b[len(t.b)-t.keep:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) bytes() []byte { return t.b[max(0, len(t.b)-t.keep):] }
