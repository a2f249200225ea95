package testbed_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"universalcontroller.dev/uc/test/testbed"
)

// TestFreezeThaw: a frozen process is stopped (state T) until thawed, and
// Stop ends a frozen process that handles SIGTERM without waiting for the
// SIGKILL.
func TestFreezeThaw(t *testing.T) {
	// A shell that handles SIGTERM: frozen, it would not see one.
	p, err := testbed.StartProcess("sh", "/bin/sh", filepath.Join(t.TempDir(), "sh.log"),
		"-c", `trap "exit 0" TERM; while :; do sleep 0.1; done`)
	if err != nil {
		t.Fatal(err)
	}
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
