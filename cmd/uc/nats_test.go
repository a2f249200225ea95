package main

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/util/wait"

	"universalcontroller.dev/uc/internal/bustest"
	"universalcontroller.dev/uc/internal/topology"
	"universalcontroller.dev/uc/schemas/bus"
)

// TestEmbeddedNATSFreePort: with port 0, each embedded server takes a free
// port, not nats-server's default 4222, and says which in its ClientURL.
func TestEmbeddedNATSFreePort(t *testing.T) {
	ports := map[string]bool{}
	for range 2 {
		ns, err := startEmbeddedNATS("127.0.0.1:0", t.TempDir(), slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(ns.Shutdown)
		u, err := url.Parse(ns.ClientURL())
		if err != nil {
			t.Fatal(err)
		}
		if p := u.Port(); p == "0" || p == "4222" || ports[p] {
			t.Fatalf("embedded NATS on %s, after %v", ns.ClientURL(), ports)
		}
		ports[u.Port()] = true
		nc, err := nats.Connect(ns.ClientURL())
		if err != nil {
			t.Fatalf("connect to %s: %v", ns.ClientURL(), err)
		}
		nc.Close()
	}
}

// TestEmbeddedNATSCannotStart: a --nats-listen port another process holds,
// or a --data-dir that is a file, ends the start at once with the server's
// own error, which uc's log shows too (nats-server's own logger would have
// ended the process; without one the start waited its whole timeout and
// said only that the server did not start).
func TestEmbeddedNATSCannotStart(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, listen, dir, says string
	}{
		{"port in use", l.Addr().String(), t.TempDir(), "address already in use"},
		{"data dir a file", "127.0.0.1:0", file, "storage directory is not a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs strings.Builder
			log := slog.New(slog.NewTextHandler(&logs, nil))
			start := time.Now()
			ns, err := startEmbeddedNATS(tc.listen, tc.dir, log)
			if err == nil {
				ns.Shutdown()
				t.Fatalf("embedded NATS started on %s in %s", tc.listen, tc.dir)
			}
			if !strings.Contains(err.Error(), tc.says) {
				t.Errorf("error %q does not say %q", err, tc.says)
			}
			if !strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), tc.says) {
				t.Errorf("uc's log does not show the server's error:\n%s", logs.String())
			}
			if waited := time.Since(start); waited >= natsStartTimeout {
				t.Errorf("the start took %s: it waited for its timeout", waited)
			}
		})
	}
}

// natsWithUser runs an embedded JetStream server with uc's streams whose
// one user, uc, has the password old until rotate gives it new.
func natsWithUser(t *testing.T) (*server.Server, func()) {
	opts := &server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true,
		Users: []*server.User{{Username: "uc", Password: "old"}}}
	ns := bustest.Start(t, opts)
	js := bustest.Connect(t, ns.ClientURL(), nats.UserInfo("uc", "old"))
	defer js.Conn().Close() // refused after the rotation: gone before
	if err := topology.EnsureStreams(t.Context(), js, topology.Streams, topology.Options{Storage: jetstream.MemoryStorage}); err != nil {
		t.Fatal(err)
	}
	return ns, func() {
		rotated := opts.Clone()
		rotated.Users = []*server.User{{Username: "uc", Password: "new"}}
		if err := ns.ReloadOptions(rotated); err != nil {
			t.Fatal(err)
		}
	}
}

// expectClosedForGood waits for what's end, which must be an error
// saying the connection closed, naming the server's refusal.
func expectClosedForGood(t *testing.T, what string, done <-chan error) {
	t.Helper()
	select {
	case err := <-done:
		if !errors.Is(err, nats.ErrConnectionClosed) || !strings.Contains(err.Error(), "Authorization Violation") {
			t.Errorf("%s: %v, want the connection closed naming the refusal", what, err)
		}
	case <-time.After(time.Minute):
		t.Fatalf("%s: still running a minute after its password was refused", what)
	}
}

// TestUntilClosed: a role whose password, given as a flag, the server
// no longer takes ends with an error once nats.go gives up (so that the
// process exits and is started again); one whose context ends first, or
// whose password comes from a file, does not.
func TestUntilClosed(t *testing.T) {
	ns, rotate := natsWithUser(t)
	file := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(file, []byte("old\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	connect := func(c bus.Connection) *nats.Conn {
		o, err := c.Options()
		if err != nil {
			t.Fatal(err)
		}
		nc, err := nats.Connect(ns.ClientURL(), append(o, nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond),
			nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
	run := func(nc *nats.Conn) (context.CancelFunc, chan error) {
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		until := bus.UntilClosed(nc)
		go func() { done <- until(ctx) }()
		return cancel, done
	}
	flag := connect(bus.Connection{User: "uc", Password: "old"})
	fromFile := connect(bus.Connection{User: "uc", PasswordFile: file})
	stopped := connect(bus.Connection{User: "uc", Password: "old"})
	_, flagDone := run(flag)
	_, fileDone := run(fromFile)
	cancel, stoppedDone := run(stopped)
	cancel()
	if err := <-stoppedDone; err != nil {
		t.Errorf("context ended: %v, want nil", err)
	}

	rotate()
	expectClosedForGood(t, "the password of a flag refused", flagDone)
	// The client reading its password from a file keeps trying: refused
	// as often as the other one was, it is not closed.
	err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return fromFile.Stats().Reconnects >= 3, nil
	})
	if err != nil || fromFile.IsClosed() {
		t.Fatalf("the password of a file: %s after %d attempts (%v)", fromFile.Status(), fromFile.Stats().Reconnects, err)
	}
	select {
	case err := <-fileDone:
		t.Fatalf("the password of a file refused: %v, want it trying still", err)
	default:
	}
}
