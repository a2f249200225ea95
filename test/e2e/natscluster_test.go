package e2e

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"universalcontroller.dev/uc/test/testbed"
)

// TestNATSCluster runs uc's roles on a three-node NATS JetStream cluster
// with streams replicated three times. One node is killed (SIGKILL) in the
// middle of a burst of creations, then the whole cluster is restarted in the
// middle of a burst of updates: every parent converges, nothing is lost.
func TestNATSCluster(t *testing.T) {
	ctx := t.Context()
	cluster, err := testbed.StartNATSCluster(ctx, filepath.Join(t.TempDir(), "nats"), 3)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Stop)
	// Each partition has its own R3 consumer (a raft group): 8 keep this
	// two-core test bed responsive.
	b := newRolesOnBus(t, cluster.URL(), "--stream-replicas", "3", "--partitions", "8")
	b.start("dispatcher", "dispatcher")
	b.start("watcher", "watcher", "--leader-elect=false")
	b.start("applier", "applier")

	const n = 40
	names := make([]string, n)
	for i := range n {
		names[i] = fmt.Sprintf("w-%02d", i)
	}
	for i, name := range names {
		if i == n/2 {
			cluster.Servers[1].Kill()
			t.Log("killed NATS node n1 in the middle of the creations")
		}
		b.createWidget(name, "created")
	}
	eventually(t, 3*time.Minute, b.converged("created", names...))
	if err := cluster.Servers[1].Restart(ctx); err != nil {
		t.Fatal(err)
	}

	for i, name := range names {
		if i == n/2 {
			start := time.Now()
			if err := cluster.Restart(ctx); err != nil {
				t.Fatal(err)
			}
			t.Logf("restarted the whole NATS cluster in the middle of the updates (%s)", time.Since(start).Round(time.Millisecond))
		}
		b.setWidget(name, "updated")
	}
	eventually(t, 3*time.Minute, b.converged("updated", names...))
}
