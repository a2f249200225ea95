package testbed_test

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"universalcontroller.dev/uc/test/testbed"
)

// termWaiter is the environment variable that makes the test binary a
// process that waits for SIGTERM and exits 0 on it.
const termWaiter = "TESTBED_TERM_WAITER"

func TestMain(m *testing.M) {
	if os.Getenv(termWaiter) != "" {
		terms := make(chan os.Signal, 1)
		signal.Notify(terms, syscall.SIGTERM)
		fmt.Println("waiting for SIGTERM")
		<-terms
		return
	}
	os.Exit(m.Run())
}

// TestFreezeThaw: a frozen process is stopped (state T) until thawed, and
// Stop ends a frozen process that handles SIGTERM without waiting for the
// SIGKILL.
func TestFreezeThaw(t *testing.T) {
	// A process that handles SIGTERM (frozen, it would not see one) and never
	// forks: a shell looping over sleep could be caught by SIGSTOP in a vfork,
	// waiting for a stopped child, and not be in state T itself.
	t.Setenv(termWaiter, "1")
	log := filepath.Join(t.TempDir(), "waiter.log")
	p, err := testbed.StartProcess("waiter", os.Args[0], log, "-test.run=^$")
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the process to handle SIGTERM", 10*time.Second, func(context.Context) (bool, error) {
		b, err := os.ReadFile(log)
		return strings.Contains(string(b), "waiting for SIGTERM"), err
	})
	t.Cleanup(p.Kill)
	stopped := func(want bool) func(context.Context) (bool, error) {
		return func(context.Context) (bool, error) {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.PID()))
			if err != nil {
				return false, err
			}
			// pid (comm) state …
			_, rest, _ := strings.Cut(string(b), ") ")
			return strings.HasPrefix(rest, "T") == want, nil
		}
	}
	p.Freeze()
	eventually(t, "the process stopped", 5*time.Second, stopped(true))
	p.Thaw()
	eventually(t, "the process resumed", 5*time.Second, stopped(false))
	p.Freeze()
	eventually(t, "the process stopped again", 5*time.Second, stopped(true))
	begin := time.Now()
	p.Stop(30 * time.Second)
	if took := time.Since(begin); took > 10*time.Second {
		t.Errorf("stopping a frozen process took %s: it waited for the SIGKILL", took)
	}
	if p.Exited() == nil {
		t.Error("the process still runs after Stop")
	}
}
