package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/test/testbed"
)

// TestNATSRestart runs uc's roles as separate processes on a nats-server
// with file storage — a dispatcher, a watcher and two appliers — and the
// hook worker on the Go SDK. Once 20 parents have converged, nats-server is
// SIGKILLed and restarted on the same store, and every parent is edited:
// each converges to its edit without any uc process restarting, though the
// server came back without the consumers whose state it kept in memory.
func TestNATSRestart(t *testing.T) {
	ctx := t.Context()
	srv, err := testbed.StartNATS(ctx, filepath.Join(t.TempDir(), "nats"), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	b := newRolesOnBus(t, srv.URL())
	roles := []*roleProcess{
		b.start("dispatcher", "dispatcher"),
		b.start("watcher", "watcher", "--leader-elect=false"),
		b.start("applier-a", "applier"),
		b.start("applier-b", "applier"),
	}
	names := make([]string, 20)
	for i := range names {
		names[i] = fmt.Sprintf("w-%02d", i)
		b.createWidget(names[i], "v1")
	}
	eventually(t, 2*time.Minute, b.converged("v1", names...))

	srv.Kill()
	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	t.Log("nats-server SIGKILLed and restarted on its store")
	for _, name := range names {
		b.setWidget(name, "v2")
	}
	eventually(t, time.Minute, b.converged("v2", names...))
	t.Logf("all %d parents converged to their edit %s after the restart", len(names), time.Since(restarted).Round(100*time.Millisecond))
	for _, r := range roles {
		if err := r.proc.Exited(); err != nil {
			t.Errorf("%s exited: %v", r.name, err)
		}
	}
}

// TestRepublishLostRequest: a request lost on the bus — purged from
// UC_REQUESTS before any hook worker took it — leaves nothing that would
// sync its parent again. Not even a new watcher: the request it publishes
// for the parent carries the lost one's id (it is made of what it
// observed), and the bus drops it as a duplicate. The watcher finds the
// request nowhere along the pipeline once its grace period is over,
// publishes the parent again, and the parent converges.
func TestRepublishLostRequest(t *testing.T) {
	ctx := t.Context()
	srv, err := testbed.StartNATS(ctx, filepath.Join(t.TempDir(), "nats"), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	b := newRolesOnBus(t, srv.URL())
	b.start("dispatcher", "dispatcher")
	first := b.start("watcher", "watcher", "--leader-elect=false")
	applier := b.start("applier", "applier")
	w := b.createWidget("lost", "v1")
	eventually(t, time.Minute, b.converged("v1", "lost"))
	subject := bus.Address{Controller: "widget-controller", Hook: hooks.Sync,
		Partition: bus.Partition(w.GetUID(), bus.DefaultPartitions), ParentUID: w.GetUID()}.RequestSubject()
	requests, err := b.js.Stream(ctx, bus.RequestStream)
	if err != nil {
		t.Fatal(err)
	}
	// The new watcher chains its request to the one the fence says was
	// applied: the lost request has the same predecessor only if nothing
	// was published after that one. So the test waits until the last
	// request published was applied and wrote nothing: an apply that wrote
	// the parent's status is followed by the echo of that write, a request
	// the fence does not name yet.
	fence, err := b.js.KeyValue(ctx, bus.FenceBucket)
	if err != nil {
		t.Fatal(err)
	}
	parent := "parent=" + b.ns + "/lost"
	field := func(line, name string) string {
		_, v, _ := strings.Cut(line, " "+name+"=")
		v, _, _ = strings.Cut(v, " ")
		return v
	}
	eventually(t, 30*time.Second, func() error {
		last := first.lastLine("msg=published", parent)
		id, observation := field(last, "id"), field(last, "observation")
		e, err := fence.Get(ctx, string(w.GetUID()))
		if err != nil {
			return err
		}
		f, err := bus.ParseFence(e.Value())
		switch {
		case err != nil:
			return err
		case f.Request != id:
			return fmt.Errorf("the last request published, %q, is not the one applied last, %s", id, f.Request)
		case !applier.logHas("msg=applied", parent, " observation="+observation+" ", "writes=0"):
			return fmt.Errorf("the last request published, of observation %s, wrote something: its echo is coming", observation)
		}
		return nil
	})

	b.pauseWorker()
	w = b.setWidget("lost", "v2")
	eventually(t, 30*time.Second, func() error {
		msg, err := requests.GetLastMsgForSubject(ctx, subject)
		if err != nil {
			return err
		}
		e, err := bus.FromMsg(ctx, msg.Subject, msg.Header, msg.Data)
		if err != nil {
			return err
		}
		m, err := bus.MetaOf(e)
		if err == nil && m.Generation != w.GetGeneration() {
			err = fmt.Errorf("the request waiting is of generation %d, want %d", m.Generation, w.GetGeneration())
		}
		return err
	})
	if err := requests.Purge(ctx, jetstream.WithPurgeSubject(subject)); err != nil {
		t.Fatal(err)
	}
	purged := time.Now()
	t.Log("purged the parent's request before any worker took it")
	first.proc.Kill()
	watcher := b.start("watcher-2", "watcher", "--leader-elect=false")
	b.startWorker()
	eventually(t, time.Minute, func() error {
		if !watcher.logHas("msg=published", parent, "duplicate=true") {
			return fmt.Errorf("the new watcher's request for the parent was not dropped as a duplicate")
		}
		return nil
	})
	eventually(t, 3*time.Minute, b.converged("v2", "lost"))
	t.Logf("the parent converged %s after its request was purged", time.Since(purged).Round(100*time.Millisecond))
	if !watcher.logHas("publishing the parent again", parent) {
		t.Error("the watcher never said it published the parent again")
	}
}
