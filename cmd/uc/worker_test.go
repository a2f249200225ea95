package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"k8s.io/apimachinery/pkg/util/wait"

	"universalcontroller.dev/uc/schemas/bus"
)

// TestParseWorker: uc worker takes its flags from the command line or UC_*
// variables, the command after them, and refuses what it cannot serve
// before connecting.
func TestParseWorker(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		env     map[string]string
		want    string // the config, as want formats it
		wantErr string
	}{
		{args: []string{"--controller", "c", "--", "sh", "-c", "cat"},
			want: "c [sync] [sh -c cat] 16 10s nats://127.0.0.1:4222"},
		{args: []string{"--hook", "sync,finalize", "--concurrency", "2", "--timeout", "3s", "sh", "hook.sh"},
			env:  map[string]string{"UC_CONTROLLER": "ucd=d", "UC_NATS_URL": "nats://bus:4222"},
			want: "ucd=d [sync finalize] [sh hook.sh] 2 3s nats://bus:4222"},
		{args: []string{"--", "sh"}, wantErr: "--controller is needed"},
		{args: []string{"--controller", "c"}, wantErr: "no command"},
		{args: []string{"--controller", "c", "--hook", "sync,render", "sh"}, wantErr: `--hook "render"`},
		{args: []string{"--controller", "c", "--concurrency", "0", "sh"}, wantErr: "--concurrency 0"},
		{args: []string{"--controller", "c", "--timeout", "0s", "sh"}, wantErr: "--timeout 0s"},
		{args: []string{"--controller", "c", "uc-no-such-command"}, wantErr: "executable file not found"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			cfg, err := parseWorker(t, tc.args)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want one naming %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := fmt.Sprint(cfg.controller, " ", cfg.hooks, " ", cfg.argv, " ", cfg.concurrency, " ", cfg.timeout.Round(time.Millisecond), " ", cfg.nats.URL)
			if got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

// parseWorker runs `uc worker args` up to where it would serve, and returns
// the config it would serve with.
func parseWorker(t *testing.T, args []string) (workerConfig, error) {
	var got workerConfig
	root := newRootCommand()
	c := newWorkerCommand(func(_ context.Context, cfg workerConfig, _ *slog.Logger) error {
		got = cfg
		return nil
	})
	bindEnv(c.Flags())
	if old, _, err := root.Find([]string{"worker"}); err == nil {
		root.RemoveCommand(old)
	}
	root.AddCommand(c)
	root.SetArgs(append([]string{"worker"}, args...))
	root.SetOut(io.Discard)
	root.SetErr(io.Discard)
	err := root.ExecuteContext(t.Context())
	return got, err
}

// TestWorkerEndsWhenNATSClosesForGood: uc worker, its password given as a
// flag, ends with an error once the server refuses it for good (its
// supervisor starts it again with the password it has then), instead of
// waiting forever without a connection.
func TestWorkerEndsWhenNATSClosesForGood(t *testing.T) {
	ns, rotate := natsWithUser(t)
	cfg := workerConfig{controller: "c", hooks: []string{"sync"}, argv: []string{"true"}, concurrency: 1, timeout: time.Second,
		maxReply: 1 << 20, nats: bus.Connection{URL: ns.ClientURL(), User: "uc", Password: "old"}}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	done := make(chan error, 1)
	go func() { done <- serveWorker(t.Context(), cfg, log) }()
	err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		conns, err := ns.Connz(&server.ConnzOptions{})
		return err == nil && slices.ContainsFunc(conns.Conns, func(c *server.ConnInfo) bool { return c.Name == "uc-worker-c" }), nil
	})
	if err != nil {
		t.Fatalf("the worker never connected: %v", err)
	}
	rotate()
	expectClosedForGood(t, "uc worker", done)
}
