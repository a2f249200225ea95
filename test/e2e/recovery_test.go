package e2e

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"universalcontroller.dev/uc/examples/fanout"
	"universalcontroller.dev/uc/test/testbed"
)

// recoveryParents is how many Fanouts are updated while a process is killed.
const recoveryParents = 100

// recoveryFault is one process killed while the Fanouts are updated.
type recoveryFault struct {
	what   string
	victim func(t *testing.T) *roleProcess
	// replace restarts the victim, unless the fault leaves it dead, and
	// returns a check that passes once its replacement is ready.
	replace func(t *testing.T, victim *roleProcess) func() error
}

// TestRecoveryAfterKill runs uc's roles as separate processes on an external
// nats-server (startFanoutRoles) and, for one role at a time, SIGKILLs a
// process halfway through an update wave of 100 Fanouts (ten updates at a
// time, so that the pipeline has a backlog), then restarts it with the same
// flags, as a kubelet restarts a container, after a first wave without a
// fault to read the others against: the active watcher (its replacement is
// the watcher that takes the lease next), an applier (restarted with its
// replica id), a Fanout hook worker, the dispatcher, and last an applier
// that stays dead (its partitions go to the other replicas). Each update
// must reach every parent: every Fanout converges to its latest generation
// and no ConfigMap goes back to an older payload or is created twice. It
// logs, for each fault, the time from the kill to the replacement being
// ready and from then to every parent converged, and the acks on the bus
// meanwhile: messages settled only on a second delivery, and in-progress
// heartbeats.
func TestRecoveryAfterKill(t *testing.T) {
	srv, err := testbed.StartNATS(t.Context(), filepath.Join(t.TempDir(), "nats"), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	roles := startFanoutRoles(t, srv.URL())
	acks := recordAcks(t, srv.URL())
	parents := recordChanges(t, fanout.GVR, roles.ns)
	children := recordChanges(t, configMapGVR, roles.ns)
	names := createFanouts(t, roles.ns, recoveryParents)
	eventually(t, 3*time.Minute, func() error { return chaosConverged(parents, children, names) })

	restartUntilReady := func(t *testing.T, victim *roleProcess) func() error {
		roles.restart(victim)
		return func() error {
			url, err := readyz(victim)
			if err != nil {
				return err
			}
			return expectHTTP(t.Context(), url, http.StatusOK)()
		}
	}
	faults := []recoveryFault{{
		// The time an update wave takes to converge without a fault, to
		// read the others against.
		what:    "nothing",
		victim:  func(*testing.T) *roleProcess { return nil },
		replace: func(*testing.T, *roleProcess) func() error { return func() error { return nil } },
	}, {
		what:   "the active watcher",
		victim: func(t *testing.T) *roleProcess { return activeWatcher(t, roles.ns, roles.watchers) },
		// Its replacement is the first watcher to take the lease: the
		// standby, or the victim restarted.
		replace: func(t *testing.T, victim *roleProcess) func() error {
			leads := func() int { return len(linesWith(t, "leading: this watcher is active", roles.watchers)) }
			led := leads()
			roles.restart(victim)
			return func() error {
				if leads() == led {
					return fmt.Errorf("no watcher leads yet")
				}
				return nil
			}
		},
	}, {
		what:    "an applier",
		victim:  func(*testing.T) *roleProcess { return roles.appliers[0] },
		replace: restartUntilReady,
	}, {
		what:   "a hook worker",
		victim: func(*testing.T) *roleProcess { return roles.hooks[0] },
		replace: func(t *testing.T, victim *roleProcess) func() error {
			serves := func() int { return len(linesWith(t, "msg=serving", []*roleProcess{victim})) }
			served := serves()
			roles.restart(victim)
			return func() error {
				if serves() == served {
					return fmt.Errorf("%s does not serve yet", victim.name)
				}
				return nil
			}
		},
	}, {
		what:    "the dispatcher",
		victim:  func(*testing.T) *roleProcess { return roles.dispatcher },
		replace: restartUntilReady,
	}, {
		what:   "an applier, not restarted",
		victim: func(*testing.T) *roleProcess { return roles.appliers[1] },
		// The other replicas replace it: measured from the kill.
		replace: func(*testing.T, *roleProcess) func() error { return func() error { return nil } },
	}}

	var report []string
	for i, f := range faults {
		if !t.Run("kill "+f.what, func(t *testing.T) {
			payload := fmt.Sprintf("v%d", i+2)
			victim := f.victim(t)
			half, updated := make(chan struct{}), make(chan struct{})
			go func() {
				defer close(updated)
				updateAll(t, roles.ns, names, payload, half)
			}()
			<-half
			before := acks.counts()
			if victim != nil {
				victim.proc.Kill()
			}
			killed := time.Now()
			eventually(t, 2*time.Minute, f.replace(t, victim))
			ready := time.Now()
			<-updated
			eventually(t, 3*time.Minute, func() error { return chaosConverged(parents, children, names) })
			converged := time.Now()
			during := acks.counts().since(before)
			line := fmt.Sprintf("%-26s | %5.1f s | %5.1f s | %5.1f s | %4d | %5d | %5d", f.what,
				ready.Sub(killed).Seconds(), converged.Sub(ready).Seconds(), converged.Sub(killed).Seconds(),
				during.again, during.settled, during.progress)
			t.Logf("killed %s halfway through updating %d Fanouts to %s: %s", f.what, recoveryParents, payload, line)
			report = append(report, line)
		}) {
			return
		}
	}
	t.Logf("recovery after a SIGKILL, %d Fanouts updated, each kill halfway through:\n"+
		"%-26s | kill to replacement ready | ready to all converged | kill to all converged | settled on a redelivery | settled | in-progress acks\n%s",
		recoveryParents, "killed", strings.Join(report, "\n"))

	created, deleted, backwards := childHistory(children.all())
	for _, problems := range []struct {
		what  string
		found []string
	}{{"created twice", created}, {"deleted without cause", deleted}, {"written back to an older payload", backwards}} {
		if len(problems.found) > 0 {
			t.Errorf("%s: %s", problems.what, strings.Join(problems.found, "; "))
		}
	}
	for _, r := range roles.all() {
		if err := r.proc.Exited(); err != nil && r != roles.appliers[1] {
			t.Errorf("%s exited: %v", r.name, err)
		}
	}
}

// updateAll sets the payload of the named Fanouts, ten at a time, and
// closes half when half of them are updated.
func updateAll(t *testing.T, ns string, names []string, payload string, half chan<- struct{}) {
	todo := make(chan string)
	var updated atomic.Int32
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			for n := range todo {
				patchFanout(t, ns, n, payload)
				if int(updated.Add(1)) == len(names)/2 {
					close(half)
				}
			}
		})
	}
	for _, n := range names {
		todo <- n
	}
	close(todo)
	wg.Wait()
}

// ackRecord counts the acknowledgements JetStream consumers receive, seen
// by a plain subscriber of $JS.ACK.>.
type ackRecord struct {
	mu sync.Mutex
	n  ackCounts
}

// ackCounts are counts of acknowledgements: messages settled (acked or
// terminated), those of them settled on a second or later delivery, and
// in-progress heartbeats.
type ackCounts struct{ settled, again, progress int }

func (c ackCounts) since(before ackCounts) ackCounts {
	return ackCounts{c.settled - before.settled, c.again - before.again, c.progress - before.progress}
}

// recordAcks counts every acknowledgement on the nats-server at url until
// the test ends.
func recordAcks(t *testing.T, url string) *ackRecord {
	t.Helper()
	nc, err := nats.Connect(url, nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	r := &ackRecord{}
	_, err = nc.Subscribe("$JS.ACK.>", func(m *nats.Msg) {
		// The ack subject is the delivery's reply subject: its metadata
		// says how many times the message was delivered.
		meta, err := (&nats.Msg{Reply: m.Subject, Sub: m.Sub}).Metadata()
		if err != nil {
			return
		}
		kind := string(m.Data)
		r.mu.Lock()
		defer r.mu.Unlock()
		switch {
		case kind == "+WPI":
			r.n.progress++
		case kind == "+ACK" || kind == "" || strings.HasPrefix(kind, "+TERM"):
			r.n.settled++
			if meta.NumDelivered > 1 {
				r.n.again++
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *ackRecord) counts() ackCounts {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}
