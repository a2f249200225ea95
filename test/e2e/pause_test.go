package e2e

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"

	"universalcontroller.dev/uc/examples/fanout"
	"universalcontroller.dev/uc/internal/topology"
	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/test/testbed"
)

// Pause test sizes and pause lengths. A pause is the fault: its length is
// fixed, everything else waits for a condition.
const (
	pauseParents = 200
	// pauseApplier is well past an applier's partition lease
	// (topology.LeaseTTL, 8 s): the other replicas take its partitions.
	pauseApplier = 3 * topology.LeaseTTL
	// pauseWatcher is well past the watchers' Lease (cmd/uc/leader.go: 6 s,
	// a standby retrying every second): the standby takes over.
	pauseWatcher = 20 * time.Second
	pauseNATS    = 14 * time.Second
	pauseAPI     = 15 * time.Second
	// pauseConverge bounds how long a wave may take to converge, room for
	// the watcher's safety net (a lost request is published again after a
	// minute): a run that converges is much faster, and logs its times.
	pauseConverge = 2 * time.Minute
)

// TestPause runs uc as an operator would on an external nats-server
// (startFanoutRoles: 2 watchers electing a leader, a dispatcher, 3
// appliers, 2 bus-native Fanout hook workers, each its own process), with
// 200 Fanouts of 3 ConfigMaps, and updates every Fanout in waves v1, v2…
// v8: the hook writes the wave's payload into the children. In the middle
// of a wave (once a quarter of its ConfigMaps carry it), one process is
// paused with SIGSTOP and resumed with SIGCONT after a fixed time, as a
// long GC pause or a frozen VM would: (a) an applier, three times its
// partition lease, while the next wave is made for the other replicas to
// apply; (b) the active watcher, past its Lease, while the standby takes
// over and the next wave is made; (c) nats-server for 14 s and (d)
// kube-apiserver for 15 s. A last wave follows the faults. Issue 25, and
// invariants 3 and 4 of the design: a process that resumes writes nothing
// stale.
//
// A recorder watches every Fanout and ConfigMap from before the first
// create (relisting if its watch expires), and a subscriber on the bus sees
// every hook request. The invariants: every Fanout converges on the wave of
// each fault after the thaw, and on the last wave; no ConfigMap is written
// back to an older wave's payload; no Fanout's status.observedGeneration
// goes back; no ConfigMap is created twice or deleted; no two applies of a
// parent overlap across the appliers' logs (an apply a pause interrupted
// lasts until it ends, after the thaw, or until its gate closed — its
// replica's hold on the partition lapsed, and it wrote nothing after:
// writable_until in its log); the resumed leader publishes no
// request that observed a Fanout older than a request published before for
// it, and stands by — it does not exit, and leaves the Lease to its
// successor; no process exits or panics. It logs the time from each thaw
// until every Fanout converged, and whether the wave made during a pause
// converged before the thaw.
func TestPause(t *testing.T) {
	if pauseApplier < 2*topology.LeaseTTL {
		t.Fatalf("an applier's pause of %s is not well past its partition lease, %s", pauseApplier, topology.LeaseTTL)
	}
	ctx := t.Context()
	srv, err := testbed.StartNATS(ctx, filepath.Join(t.TempDir(), "nats"), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	roles := startFanoutRoles(t, srv.URL())
	run := &pauseRun{
		fanoutRoles: roles,
		srv:         srv,
		requests:    recordRequests(t, srv.URL()),
		parents:     recordHistory(t, fanout.GVR, roles.ns),
		children:    recordHistory(t, configMapGVR, roles.ns),
		exits:       map[*roleProcess]time.Time{},
	}
	go run.followExits(ctx)
	created := time.Now()
	run.names = createFanouts(t, roles.ns, pauseParents)
	logs := append(slices.Clone(roles.all()), &roleProcess{name: "nats-server", log: filepath.Join(srv.Dir(), "nats-server.log")})
	t.Cleanup(func() {
		if t.Failed() {
			keepLogs(t, logs, nil)
		}
	})
	if !t.Run("wave 1: the Fanouts are created", func(t *testing.T) {
		run.converge(t, 1, created, "after their creation began")
	}) {
		return
	}

	t.Run("wave 2: an applier paused past its partition lease, wave 3 made meanwhile", func(t *testing.T) {
		victim := roles.appliers[0]
		f := run.pause(t, 2, fault{what: victim.name, length: pauseApplier, freeze: victim.proc.Freeze, thaw: victim.proc.Thaw,
			meanwhile: func(t *testing.T, f *pauseFault) {
				<-run.update(t, 3)
				run.convergeBy(t, 3, f)
			},
			answers: run.responds(victim)})
		run.converge(t, 3, f.thawed, "after the thaw")
		run.survived(t, victim)
	})

	t.Run("wave 4: the active watcher paused past its lease, wave 5 made meanwhile", func(t *testing.T) {
		leader := activeWatcher(t, roles.ns, roles.watchers)
		identity := run.leaseHolder(t)
		var successor string
		f := run.pause(t, 4, fault{what: leader.name, length: pauseWatcher, freeze: leader.proc.Freeze, thaw: leader.proc.Thaw,
			meanwhile: func(t *testing.T, f *pauseFault) {
				if err := poll(t.Context(), time.Until(f.frozen.Add(f.length)), func() error {
					successor = run.leaseHolder(t)
					if successor == identity || successor == "" {
						return fmt.Errorf("the Lease is still %s's", leader.name)
					}
					return nil
				}); err != nil {
					t.Errorf("no standby took the Lease while the leader was paused: %v", err)
				} else {
					t.Logf("the standby took the Lease %s after the pause began", time.Since(f.frozen).Round(100*time.Millisecond))
				}
				<-run.update(t, 5)
				run.convergeBy(t, 5, f)
			},
			answers: run.responds(leader)})
		run.leaderThawed = f.thawed
		run.converge(t, 5, f.thawed, "after the thaw")
		// A deposed leader that resumes stands by: it does not exit, and it
		// does not take the Lease back from its successor.
		run.survived(t, leader)
		if holder := run.leaseHolder(t); successor != "" && holder != successor {
			t.Errorf("the Lease is held by %q, not by the standby that took over, %q", holder, successor)
		}
	})

	t.Run("wave 6: nats-server paused", func(t *testing.T) {
		f := run.pause(t, 6, fault{what: "nats-server", length: pauseNATS, freeze: srv.Freeze, thaw: srv.Thaw,
			answers: func() error {
				_, err := run.requests.nc.RTT()
				return err
			}})
		run.converge(t, 6, f.thawed, "after the thaw")
	})

	t.Run("wave 7: kube-apiserver paused", func(t *testing.T) {
		api := env.bed.Component("kube-apiserver")
		f := run.pause(t, 7, fault{what: "kube-apiserver", length: pauseAPI, freeze: api.Freeze, thaw: api.Thaw, holdsUpdates: true,
			answers: func() error {
				_, err := env.kube.Discovery().ServerVersion()
				return err
			}})
		run.converge(t, 7, f.thawed, "after the thaw")
	})

	t.Run("wave 8: after the faults", func(t *testing.T) {
		start := time.Now()
		<-run.update(t, 8)
		run.converge(t, 8, start, "after its update began")
	})

	t.Logf("the pauses, and the time each wave took to converge after the thaw:\n%s", run.report())

	t.Run("no ConfigMap written back to an older payload", func(t *testing.T) {
		back := payloadRegressions(run.children.all())
		run.explain(t, "ConfigMap writes that went back to an older payload", back)
	})
	t.Run("no Fanout's observedGeneration goes back", func(t *testing.T) {
		back := observedGenerationRegressions(run.parents.all())
		run.explain(t, "Fanout status writes whose observedGeneration went back", back)
	})
	t.Run("no ConfigMap created twice or deleted", func(t *testing.T) {
		created, deleted, _ := childHistory(changesOf(run.children.all()))
		t.Logf("%d ConfigMap changes recorded (the recorder relisted %d times); created twice: %d, deleted: %d",
			len(run.children.all()), run.children.relisted(), len(created), len(deleted))
		if len(created) > 0 {
			t.Errorf("%d ConfigMaps created twice: %s", len(created), strings.Join(created[:min(len(created), 10)], "; "))
		}
		if len(deleted) > 0 {
			t.Errorf("%d ConfigMaps deleted: %s", len(deleted), strings.Join(deleted[:min(len(deleted), 10)], "; "))
		}
	})
	t.Run("at most one apply of a parent at a time", func(t *testing.T) {
		found, applied := applyOverlaps(t, roles.appliers, nil)
		frozen := run.frozenApplies(t)
		gated := len(linesWith(t, "writable_until=", roles.appliers[:1]))
		t.Logf("%d applies of %d parents logged; %d applies of %s were in flight when it was paused, %d of its applies ended after their gate closed; overlapping applies: %d",
			applied.applies, applied.parents, frozen, roles.appliers[0].name, gated, len(found))
		if frozen > 0 && gated == 0 {
			t.Errorf("%d applies of %s were in flight when it was paused past its hold, and none found its gate closed", frozen, roles.appliers[0].name)
		}
		if applied.parents < pauseParents {
			// (More when the suite's other tests left Fanouts behind: the
			// roles serve every Fanout.)
			t.Errorf("the appliers' logs show applies of %d parents, want at least %d: the check does not see them all", applied.parents, pauseParents)
		}
		if len(found) > 0 {
			t.Errorf("%d applies overlapped another of the same parent: %s", len(found), strings.Join(found[:min(len(found), 10)], "; "))
		}
	})
	t.Run("the resumed leader publishes nothing stale", func(t *testing.T) {
		if run.leaderThawed.IsZero() {
			t.Fatal("the leader was not paused")
		}
		// Until the next pause: the subscriber may miss requests while
		// nats-server is paused.
		until := time.Now()
		if i := slices.IndexFunc(run.pauses, func(f *pauseFault) bool { return f.frozen.After(run.leaderThawed) }); i >= 0 {
			until = run.pauses[i].frozen
		}
		stale, total := run.requests.stale(run.leaderThawed, until)
		t.Logf("%d hook requests published in the %.1f s from the paused leader's thaw to the next pause; "+
			"of those, observing a Fanout older than a request published before: %d", total, until.Sub(run.leaderThawed).Seconds(), len(stale))
		if len(stale) > 0 {
			t.Errorf("%d requests observed a Fanout older than a request published before: %s", len(stale), strings.Join(stale[:min(len(stale), 10)], "; "))
		}
	})
	t.Run("no process exits or panics", func(t *testing.T) {
		for _, r := range roles.all() {
			if err := r.proc.Exited(); err != nil {
				t.Errorf("%s exited %s: %v; its last error: %s", r.name, run.exitWhen(r), err, r.lastLine("level=ERROR"))
			}
		}
		if err := env.uc.proc.Exited(); err != nil {
			t.Errorf("the suite's uc run exited: %v", err)
		}
		for _, name := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"} {
			if err := env.bed.Component(name).Exited(); err != nil {
				t.Errorf("the test bed's %s exited: %v", name, err)
			}
		}
		if panics := linesWith(t, "panic", logs); len(panics) > 0 {
			t.Errorf("%d log lines with a panic: %s", len(panics), strings.Join(panics[:min(len(panics), 10)], "\n"))
		}
	})
}

// pauseRun is the state of TestPause: the roles, the records, the pauses so
// far.
type pauseRun struct {
	*fanoutRoles
	srv      *testbed.NATSServer
	names    []string
	parents  *history
	children *history
	requests *requestRecord
	pauses   []*pauseFault
	// leaderThawed is when the paused leader resumed.
	leaderThawed time.Time

	exitsMu sync.Mutex
	exits   map[*roleProcess]time.Time // when each role that exited was first seen exited
}

// followExits notes when each role is first seen exited, until ctx ends.
func (p *pauseRun) followExits(ctx context.Context) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		for _, r := range p.all() {
			if r.proc.Exited() != nil {
				p.exitsMu.Lock()
				if _, seen := p.exits[r]; !seen {
					p.exits[r] = time.Now()
				}
				p.exitsMu.Unlock()
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// exitedAt is when the role was first seen exited.
func (p *pauseRun) exitedAt(r *roleProcess) time.Time {
	p.exitsMu.Lock()
	defer p.exitsMu.Unlock()
	return p.exits[r]
}

// exitWhen says when the role was first seen exited, against the last
// pause before, and against its own thaw if it was paused.
func (p *pauseRun) exitWhen(r *roleProcess) string {
	at := p.exitedAt(r)
	when := p.when(at)
	for _, f := range slices.Backward(p.pauses) {
		if f.what == r.name && !f.thawed.IsZero() && f.thawed.Before(at) {
			return fmt.Sprintf("%s, %.1f s after its own thaw", when, at.Sub(f.thawed).Seconds())
		}
	}
	return when
}

// fault is a process to pause.
type fault struct {
	what   string
	length time.Duration
	freeze func()
	thaw   func()
	// meanwhile runs while the process is paused, if set.
	meanwhile func(*testing.T, *pauseFault)
	// answers passes once the process runs again after its thaw.
	answers func() error
	// holdsUpdates: the wave's updates wait for the thaw.
	holdsUpdates bool
}

// pauseFault is one process paused: when, for how long, and what followed.
type pauseFault struct {
	fault
	wave           string
	frozen, thawed time.Time
	madeMeanwhile  string        // how the wave made during the pause went
	answered       time.Duration // from the thaw until the process answered, or -1
	converged      time.Duration // from the thaw until its wave converged, or -1
	once           sync.Once
}

// payload is the payload of wave n.
func payload(n int) string { return fmt.Sprintf("v%d", n) }

// update sets every Fanout's payload to wave n's, ten at a time, in the
// background; the channel returned closes when done.
func (p *pauseRun) update(t *testing.T, n int) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		updateAll(t, p.ns, p.names, payload(n), make(chan struct{}))
	}()
	return done
}

// pause updates every Fanout to wave n and, in the middle of the wave —
// once a quarter of the ConfigMaps carry its payload — freezes a process,
// runs f.meanwhile while it is frozen, thaws it once f.length has passed
// since the freeze, and waits until it answers. The process is thawed when
// the test ends, whatever happens.
func (p *pauseRun) pause(t *testing.T, n int, flt fault) *pauseFault {
	t.Helper()
	updated := p.update(t, n)
	quarter := pauseParents * chaosChildren / 4
	if err := poll(t.Context(), pauseConverge, func() error {
		if got := p.children.count(payload(n)); got < quarter {
			return fmt.Errorf("%d ConfigMaps carry %s, want %d", got, payload(n), quarter)
		}
		return nil
	}); err != nil {
		<-updated
		t.Fatalf("wave %d never reached its middle: %v", n, err)
	}
	f := &pauseFault{fault: flt, wave: payload(n), answered: -1, converged: -1}
	f.freeze()
	f.frozen = time.Now()
	p.pauses = append(p.pauses, f)
	t.Cleanup(f.end)
	t.Logf("paused %s with SIGSTOP in the middle of wave %d (%d of %d ConfigMaps at %s)",
		f.what, n, p.children.count(payload(n)), pauseParents*chaosChildren, payload(n))
	if !f.holdsUpdates {
		<-updated
	}
	if f.meanwhile != nil {
		f.meanwhile(t, f)
	}
	// The fault is the pause, of a fixed length: no condition ends it.
	select {
	case <-time.After(time.Until(f.frozen.Add(f.length))):
	case <-t.Context().Done():
	}
	f.end()
	t.Logf("resumed %s with SIGCONT after %s", f.what, f.thawed.Sub(f.frozen).Round(100*time.Millisecond))
	if err := poll(t.Context(), time.Minute, f.answers); err != nil {
		t.Errorf("%s does not answer after its thaw: %v", f.what, err)
	} else {
		f.answered = time.Since(f.thawed)
	}
	<-updated
	return f
}

// end thaws the process, once.
func (f *pauseFault) end() {
	f.once.Do(func() {
		f.thaw()
		f.thawed = time.Now()
	})
}

// responds is a check that passes once the role answers on its health
// endpoint, whatever it answers, and ends the wait when it exited.
func (p *pauseRun) responds(r *roleProcess) func() error {
	return func() error {
		if err := r.proc.Exited(); err != nil {
			return backoffStop{err}
		}
		url, err := readyz(r)
		if err != nil {
			return err
		}
		_, _, err = httpGet(p.t.Context(), url)
		return err
	}
}

// survived fails t if the paused role exited.
func (p *pauseRun) survived(t *testing.T, r *roleProcess) {
	t.Helper()
	if err := r.proc.Exited(); err != nil {
		t.Errorf("%s exited after its pause: %v", r.name, err)
	}
}

// leaseHolder is the holder of the watchers' Lease, or "".
func (p *pauseRun) leaseHolder(t *testing.T) string {
	l, err := env.kube.CoordinationV1().Leases(p.ns).Get(t.Context(), "uc-watcher", metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// converge waits until every Fanout converged on wave n and logs how long it
// took since begin; it fails at once when no watcher runs, since nothing
// could converge then. The time is noted on the pause that begin is the
// thaw of.
func (p *pauseRun) converge(t *testing.T, n int, begin time.Time, since string) {
	t.Helper()
	err := poll(t.Context(), pauseConverge, func() error {
		err := p.behind(n)
		if err != nil && !slices.ContainsFunc(p.watchers, func(w *roleProcess) bool { return w.proc.Exited() == nil }) {
			return backoffStop{fmt.Errorf("%w; no watcher runs, every one exited", err)}
		}
		return err
	})
	if err != nil {
		t.Errorf("wave %d: %v", n, err)
		return
	}
	took := time.Since(begin)
	for _, f := range p.pauses {
		if f.thawed.Equal(begin) {
			f.converged = took
		}
	}
	t.Logf("every Fanout converged on wave %d %s %s", n, took.Round(100*time.Millisecond), since)
}

// convergeBy waits until every Fanout converged on wave n, at most until
// the pause ends, and notes how it went. It is not an invariant: a parent
// whose apply the paused applier has in flight may wait for the thaw, as
// its apply lasts until then and another would overlap it.
func (p *pauseRun) convergeBy(t *testing.T, n int, f *pauseFault) {
	if err := poll(t.Context(), time.Until(f.frozen.Add(f.length)), func() error { return p.behind(n) }); err != nil {
		f.madeMeanwhile = fmt.Sprintf("wave %d not converged by the thaw", n)
		t.Logf("wave %d did not converge while %s was paused: %v", n, f.what, err)
		return
	}
	f.madeMeanwhile = fmt.Sprintf("wave %d converged %.1f s into the pause", n, time.Since(f.frozen).Seconds())
	t.Logf("wave %d converged while %s was paused, %s after the pause began", n, f.what, time.Since(f.frozen).Round(100*time.Millisecond))
}

// behind fails unless every Fanout is at wave n — its spec, and each of its
// ConfigMaps — with its generation observed, as last recorded.
func (p *pauseRun) behind(n int) error {
	want := payload(n)
	parents, children := p.parents.snapshot(), p.children.snapshot()
	var behind []string
	for _, name := range p.names {
		f := parents[name]
		if f == nil {
			return fmt.Errorf("Fanout %s is not there", name)
		}
		spec, _, _ := unstructured.NestedString(f.Object, "spec", "payload")
		observed, _, _ := unstructured.NestedInt64(f.Object, "status", "observedGeneration")
		var at []string
		for i := range chaosChildren {
			got := "none"
			if cm := children[fanout.ChildName(name, i)]; cm != nil {
				got, _, _ = unstructured.NestedString(cm.Object, "data", fanout.PayloadKey)
			}
			if got != want {
				at = append(at, got)
			}
		}
		if spec != want || observed != f.GetGeneration() || len(at) > 0 {
			behind = append(behind, fmt.Sprintf("%s (spec %s, generation %d observed %d, ConfigMaps behind at %v)",
				name, spec, f.GetGeneration(), observed, at))
		}
	}
	if len(behind) > 0 {
		return fmt.Errorf("%d Fanouts have not converged on %s: %s", len(behind), want, strings.Join(behind[:min(len(behind), 5)], ", "))
	}
	return nil
}

// report is a table of the pauses.
func (p *pauseRun) report() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-16s | %-5s | %-6s | %-40s | %-17s | %s\n", "paused", "wave", "length", "the wave made during the pause", "thaw to answering", "thaw to the latest wave converged")
	for _, f := range p.pauses {
		fmt.Fprintf(&b, "%-16s | %-5s | %4.1f s | %-40s | %17s | %s\n", f.what, f.wave,
			f.thawed.Sub(f.frozen).Seconds(), cmp.Or(f.madeMeanwhile, "-"), seconds(f.answered), seconds(f.converged))
	}
	return b.String()
}

// seconds shows a duration, or "never" for a negative one.
func seconds(d time.Duration) string {
	if d < 0 {
		return "never"
	}
	return fmt.Sprintf("%.1f s", d.Seconds())
}

// regression is one write that went back: of a ConfigMap's payload, or of
// a Fanout's observedGeneration.
type regression struct {
	name     string
	from, to int64 // the newest seen before, and the one written
	at       time.Time
	rv       string
}

// explain logs the regressions, by the pause they followed and by what
// they went back from and to, and fails t if there are any.
func (p *pauseRun) explain(t *testing.T, what string, found []regression) {
	t.Helper()
	byFault := map[string]int{}
	byStep := map[string]int{}
	for _, r := range found {
		byFault[p.during(r.at)]++
		byStep[fmt.Sprintf("%d→%d", r.from, r.to)]++
	}
	t.Logf("%s: %d; by the last pause before them: %v; by the step back: %v", what, len(found), byFault, byStep)
	if len(found) == 0 {
		return
	}
	var examples []string
	for _, r := range found[:min(len(found), 10)] {
		examples = append(examples, fmt.Sprintf("%s %d→%d at resourceVersion %s, %s", r.name, r.from, r.to, r.rv, p.when(r.at)))
	}
	t.Errorf("%d %s, e.g. %s", len(found), what, strings.Join(examples, "; "))
}

// during names the last pause that began at or before at.
func (p *pauseRun) during(at time.Time) string {
	name := "before any pause"
	for _, f := range p.pauses {
		if !at.Before(f.frozen) {
			name = f.what + " (" + f.wave + ")"
		}
	}
	return name
}

// when says when at was, against the last pause before it.
func (p *pauseRun) when(at time.Time) string {
	for _, f := range slices.Backward(p.pauses) {
		switch {
		case at.Before(f.frozen):
			continue
		case f.thawed.IsZero() || at.Before(f.thawed):
			return fmt.Sprintf("%.1f s into the pause of %s", at.Sub(f.frozen).Seconds(), f.what)
		default:
			return fmt.Sprintf("%.1f s after %s's thaw", at.Sub(f.thawed).Seconds(), f.what)
		}
	}
	return "before any pause"
}

// frozenApplies counts the applies of the paused applier that began before
// its pause and ended after it began.
func (p *pauseRun) frozenApplies(t *testing.T) int {
	i := slices.IndexFunc(p.pauses, func(f *pauseFault) bool { return f.what == p.appliers[0].name })
	if i < 0 {
		return 0
	}
	frozen := p.pauses[i].frozen.UnixNano()
	n := 0
	for _, ivs := range applies(t, p.appliers[0], func(int64) int64 { return math.MaxInt64 }) {
		for _, iv := range ivs {
			if iv.start < frozen && iv.end > frozen {
				n++
			}
		}
	}
	return n
}

// waveOf is the wave of a payload "v<n>", or false.
func waveOf(payload string) (int64, bool) {
	n, ok := strings.CutPrefix(payload, "v")
	if !ok {
		return 0, false
	}
	w, err := strconv.ParseInt(n, 10, 64)
	return w, err == nil
}

// payloadRegressions lists the recorded writes of a Fanout's ConfigMap that
// carry an older wave than one it carried before.
func payloadRegressions(changes []timedChange) []regression {
	newest := map[string]int64{}
	var found []regression
	for _, c := range changes {
		if _, child := c.obj.GetLabels()[fanout.ParentLabel]; !child || c.deleted {
			continue
		}
		p, _, _ := unstructured.NestedString(c.obj.Object, "data", fanout.PayloadKey)
		w, ok := waveOf(p)
		if !ok {
			continue
		}
		name := c.obj.GetName()
		if w < newest[name] {
			found = append(found, regression{name: name, from: newest[name], to: w, at: c.at, rv: c.obj.GetResourceVersion()})
		}
		newest[name] = max(newest[name], w)
	}
	return found
}

// observedGenerationRegressions lists the recorded writes of a Fanout whose
// status.observedGeneration is older than one it had before.
func observedGenerationRegressions(changes []timedChange) []regression {
	newest := map[string]int64{}
	var found []regression
	for _, c := range changes {
		if c.deleted {
			continue
		}
		g, ok, _ := unstructured.NestedInt64(c.obj.Object, "status", "observedGeneration")
		if !ok {
			continue
		}
		name := c.obj.GetName()
		if g < newest[name] {
			found = append(found, regression{name: name, from: newest[name], to: g, at: c.at, rv: c.obj.GetResourceVersion()})
		}
		newest[name] = max(newest[name], g)
	}
	return found
}

// history records every version of the objects of one resource in a
// namespace, from its start until the test ends, in the order of the
// watch, each with when it was seen. When its watch ends it watches again
// from where it stopped; when that is too old, it lists again (relisted
// counts those: changes between are not seen).
type history struct {
	mu       sync.Mutex
	changes  []timedChange
	latest   map[string]*unstructured.Unstructured
	payloads map[string]int // how many of the objects carry each data.payload
	relists  int
}

// timedChange is a change and when the recorder saw it.
type timedChange struct {
	change
	at time.Time
}

func recordHistory(t *testing.T, gvr schema.GroupVersionResource, ns string) *history {
	t.Helper()
	h := &history{latest: map[string]*unstructured.Unstructured{}, payloads: map[string]int{}}
	res := env.dyn.Resource(gvr).Namespace(ns)
	rv, err := h.list(t.Context(), res)
	if err != nil {
		t.Fatal(err)
	}
	go h.follow(t.Context(), res, rv)
	return h
}

// list lists the objects and records those that changed since last seen.
func (h *history) list(ctx context.Context, res dynamic.ResourceInterface) (string, error) {
	list, err := res.List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	seen := map[string]bool{}
	for i := range list.Items {
		obj := &list.Items[i]
		seen[obj.GetName()] = true
		if old := h.latest[obj.GetName()]; old == nil || old.GetResourceVersion() != obj.GetResourceVersion() {
			h.add(change{obj: obj})
		}
	}
	for name, old := range h.latest {
		if !seen[name] {
			h.add(change{deleted: true, obj: old})
		}
	}
	return list.GetResourceVersion(), nil
}

// follow watches from resourceVersion rv until ctx ends.
func (h *history) follow(ctx context.Context, res dynamic.ResourceInterface, rv string) {
	retry := func() bool {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(200 * time.Millisecond): // the apiserver may be paused
			return true
		}
	}
	for ctx.Err() == nil {
		w, err := res.Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
		if err != nil {
			if !retry() {
				return
			}
			continue
		}
		var expired bool
		rv, expired = h.drain(w, rv)
		w.Stop()
		for expired && ctx.Err() == nil {
			listed, err := h.list(ctx, res)
			if err == nil {
				rv, expired = listed, false
				h.mu.Lock()
				h.relists++
				h.mu.Unlock()
			} else if !retry() {
				return
			}
		}
	}
}

// drain records a watch's events until it ends, and returns the last
// resourceVersion seen, and whether the watch ended as too old to resume.
func (h *history) drain(w watch.Interface, rv string) (string, bool) {
	for ev := range w.ResultChan() {
		obj, ok := ev.Object.(*unstructured.Unstructured)
		switch {
		case ev.Type == watch.Error:
			err := apierrors.FromObject(ev.Object)
			return rv, apierrors.IsResourceExpired(err) || apierrors.IsGone(err)
		case !ok:
			continue
		case ev.Type == watch.Bookmark:
		default:
			h.mu.Lock()
			h.add(change{deleted: ev.Type == watch.Deleted, obj: obj})
			h.mu.Unlock()
		}
		rv = obj.GetResourceVersion()
	}
	return rv, false
}

// add records a change; h.mu is held.
func (h *history) add(c change) {
	h.changes = append(h.changes, timedChange{c, time.Now()})
	name := c.obj.GetName()
	if old := h.latest[name]; old != nil {
		h.payloads[payloadOf(old)]--
	}
	if c.deleted {
		delete(h.latest, name)
		return
	}
	h.latest[name] = c.obj
	h.payloads[payloadOf(c.obj)]++
}

func payloadOf(obj *unstructured.Unstructured) string {
	p, _, _ := unstructured.NestedString(obj.Object, "data", fanout.PayloadKey)
	return p
}

// count is how many objects carry the payload now.
func (h *history) count(payload string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.payloads[payload]
}

// snapshot is the last recorded version of every object there, by name.
func (h *history) snapshot() map[string]*unstructured.Unstructured {
	h.mu.Lock()
	defer h.mu.Unlock()
	return maps.Clone(h.latest)
}

func (h *history) all() []timedChange {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.changes)
}

func (h *history) relisted() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.relists
}

func changesOf(tcs []timedChange) []change {
	out := make([]change, len(tcs))
	for i, c := range tcs {
		out[i] = c.change
	}
	return out
}

// requestRecord records every Fanout sync request published on the bus,
// seen by a plain subscriber, from its start.
type requestRecord struct {
	nc *nats.Conn
	mu sync.Mutex
	// requests in the order the subscriber received them.
	requests []publishedRequest
}

// publishedRequest is what a request observed of its parent.
type publishedRequest struct {
	at              time.Time
	uid             types.UID
	name            string
	generation      int64
	resourceVersion uint64
}

func recordRequests(t *testing.T, url string) *requestRecord {
	t.Helper()
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	r := &requestRecord{nc: nc}
	ctx := t.Context()
	sub, err := nc.Subscribe(bus.HookRequests(fanout.Controller, hooks.Sync), func(m *nats.Msg) {
		e, err := bus.FromMsg(ctx, m.Subject, m.Header, m.Data)
		if err != nil {
			return
		}
		meta, err := bus.MetaOf(e)
		if err != nil || meta.Revision != "" {
			return
		}
		rv, _ := strconv.ParseUint(meta.ResourceVersion, 10, 64)
		r.mu.Lock()
		defer r.mu.Unlock()
		r.requests = append(r.requests, publishedRequest{at: time.Now(), uid: meta.ParentUID, name: meta.Name,
			generation: meta.Generation, resourceVersion: rv})
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return r
}

// stale lists the requests received from from until to that observed
// their parent at an older resourceVersion than a request received before
// for the same parent, and counts the requests received from from until to.
func (r *requestRecord) stale(from, to time.Time) (stale []string, total int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	newest := map[types.UID]publishedRequest{}
	for _, q := range r.requests {
		in := !q.at.Before(from) && q.at.Before(to)
		if in {
			total++
		}
		prev, seen := newest[q.uid]
		if in && seen && q.resourceVersion < prev.resourceVersion {
			stale = append(stale, fmt.Sprintf("%s at generation %d, resourceVersion %d, %.1f s after the thaw, after one at generation %d, resourceVersion %d",
				q.name, q.generation, q.resourceVersion, q.at.Sub(from).Seconds(), prev.generation, prev.resourceVersion))
		}
		if !seen || q.resourceVersion > prev.resourceVersion {
			newest[q.uid] = q
		}
	}
	return stale, total
}
