package e2e

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"universalcontroller.dev/uc/test/testbed"
)

// TestWatcherFailover runs uc as separate roles on an external NATS server
// with two watchers: one leads, and when it is killed (SIGKILL) the standby
// takes over and every parent created meanwhile converges.
func TestWatcherFailover(t *testing.T) {
	srv, err := testbed.StartNATS(t.Context(), filepath.Join(t.TempDir(), "nats"), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	b := newRolesOnBus(t, srv.URL())
	b.start("dispatcher", "dispatcher")
	b.start("applier", "applier")
	watchers := []*roleProcess{
		b.start("watcher-a", "watcher", "--leader-elect-namespace", b.ns),
		b.start("watcher-b", "watcher", "--leader-elect-namespace", b.ns),
	}
	b.createWidget("before", "1")
	eventually(t, time.Minute, b.converged("1", "before"))

	var leader, standby *roleProcess
	eventually(t, 30*time.Second, func() error {
		for i, w := range watchers {
			if w.logHas("leading: this watcher is active") {
				leader, standby = w, watchers[1-i]
				return nil
			}
		}
		return fmt.Errorf("no watcher leads")
	})
	eventually(t, 30*time.Second, b.settled("before"))
	before := b.callsOf("before")
	leader.proc.Kill()
	killed := time.Now()
	t.Logf("killed the leader, %s", leader.name)
	var names []string
	for i := range 10 {
		names = append(names, fmt.Sprintf("after-%d", i))
		b.createWidget(names[i], "1")
	}
	eventually(t, 90*time.Second, b.converged("1", names...))
	t.Logf("the standby %s took over; the 10 parents created after the kill converged %s after it",
		standby.name, time.Since(killed).Round(100*time.Millisecond))
	if !standby.logHas("leading: this watcher is active") {
		t.Fatal("the standby never logged that it leads")
	}
	// The standby's first requests repeat what the leader published for
	// the unchanged parent: JetStream drops them as duplicates.
	if n := b.callsOf("before") - before; n != 0 {
		t.Errorf("the unchanged parent had %d hook calls after the hand-over, want 0 (requests are deduplicated by content)", n)
	}
}
