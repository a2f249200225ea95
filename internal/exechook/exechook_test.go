package exechook_test

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"universalcontroller.dev/uc/internal/exechook"
	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/sdk/go/hook"
	"universalcontroller.dev/uc/test/testbed"
)

const request = `{"parent":{"metadata":{"name":"p"}}}`

// TestRun runs real commands: each ends within its bound, with the reply or
// an error that says what went wrong, and leaves no process behind.
func TestRun(t *testing.T) {
	for _, tc := range []struct {
		name    string
		script  string // run by sh -c
		timeout time.Duration
		limit   int64
		// want is the reply, or wantErr a part of the error's message.
		want, wantErr string
		reason        string        // the *hook.Error's reason; "" for a plain error
		retryAfter    time.Duration // the hold-off asked for
		within        time.Duration // how long the run may take
	}{
		{name: "reply", script: `cat`, want: request},
		{name: "garbage is passed on", script: `echo 'this is not JSON'`, want: "this is not JSON\n"},
		{name: "the command is told its hook", script: `echo "{\"hook\": \"$UC_EXEC_HOOK\"}"`, want: `{"hook": "sync"}` + "\n"},
		{name: "stderr alone is no failure", script: `echo working >&2; echo '{}'`, want: "{}\n"},
		{name: "no reply", script: `echo 'forgot to print' >&2; echo`,
			wantErr: `wrote no reply on its standard output: stderr: "forgot to print"`, reason: hook.ReasonInvalidReply},
		{name: "exit 1", script: `echo 'Traceback: ValueError: no spec' >&2; exit 1`,
			wantErr: `: exit status 1: stderr: "Traceback: ValueError: no spec"`},
		{name: "the end of a long stderr", script: `i=0; while [ $i -lt 200 ]; do echo "line $i" >&2; i=$((i+1)); done; exit 2`,
			wantErr: `line 199"`},
		{name: "hang, with a process it started", script: `sleep 60 & echo "child $!" >&2; sleep 60`, timeout: 300 * time.Millisecond,
			wantErr: "killed: context deadline exceeded", within: 2 * time.Second},
		{name: "100 MB on stdout", script: `head -c 100000000 /dev/zero`, limit: 1 << 20,
			wantErr: "reply larger than 1048576 bytes: killed", reason: hook.ReasonInvalidReply, within: 5 * time.Second},
		{name: "100 MB, ignoring SIGPIPE", script: `trap '' PIPE; while :; do head -c 1000000 /dev/zero; done`, limit: 1 << 20,
			wantErr: "reply larger than 1048576 bytes: killed", reason: hook.ReasonInvalidReply, within: 5 * time.Second},
		{name: "stdout held open by a process it started", script: `sleep 60 & echo '{}'`,
			wantErr: "a process it started kept its standard output open", within: 3 * time.Second},
		{name: "hold-off", script: `echo 30; exit 75`,
			wantErr: "asked to be called later (exit status 75)", reason: hook.ReasonWorkerError, retryAfter: 30 * time.Second},
		{name: "hold-off, backoff", script: `exit 75`,
			wantErr: "asked to be called later", reason: hook.ReasonWorkerError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			if tc.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.timeout)
				defer cancel()
			}
			h := &exechook.Handler{HookName: hooks.Sync, Argv: []string{"sh", "-c", tc.script}, MaxReplyBytes: tc.limit}
			start := time.Now()
			reply, stderr, err := h.Run(ctx, []byte(request))
			took := time.Since(start)
			t.Logf("took %s; stderr %d bytes", took.Round(time.Millisecond), len(stderr))
			if tc.within > 0 && took > tc.within {
				t.Errorf("took %s, want at most %s", took, tc.within)
			}
			if tc.wantErr == "" {
				if err != nil || string(reply) != tc.want {
					t.Fatalf("reply %q, err %v; want %q", reply, err, tc.want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err %v, want one naming %q", err, tc.wantErr)
			}
			var reason string
			var retryAfter time.Duration
			if e := (*hook.Error)(nil); errors.As(err, &e) {
				reason, retryAfter = e.Reason, e.RetryAfter
			}
			if reason != tc.reason || retryAfter != tc.retryAfter {
				t.Errorf("reason %s, retry after %s; want %s, %s", reason, retryAfter, tc.reason, tc.retryAfter)
			}
			// A process it started was killed with it.
			if _, pid, ok := strings.Cut(string(stderr), "child "); ok {
				n, err := strconv.Atoi(strings.TrimSpace(pid))
				if err != nil {
					t.Fatal(err)
				}
				waitFor(t, func() bool { return !testbed.Alive(n) }, "the process it started is still alive")
			}
		})
	}
	// Every command was waited for: none is left, running or a zombie.
	children, err := testbed.Children(os.Getpid())
	if err != nil || len(children) > 0 {
		t.Fatalf("processes left: %v (%v)", children, err)
	}
}

// waitFor polls cond until it holds, failing with msg after 5 s.
func waitFor(t *testing.T, cond func() bool, msg string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	if err != nil {
		t.Fatal(msg)
	}
}

// TestRunNoCommand: a command that cannot start fails the call.
func TestRunNoCommand(t *testing.T) {
	for _, argv := range [][]string{nil, {"uc-no-such-command"}} {
		h := &exechook.Handler{HookName: hooks.Sync, Argv: argv}
		if _, _, err := h.Run(t.Context(), []byte(request)); err == nil {
			t.Errorf("%q ran", argv)
		}
	}
}
