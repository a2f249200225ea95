package e2e

import (
	"cmp"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"universalcontroller.dev/uc/test/testbed"
)

// interval is one apply of one parent by one replica.
type interval struct {
	replica    string
	start, end int64
}

var applyLine = regexp.MustCompile(`msg=apply .* uid=(\S+) phase=(start|end) at=(\d+)(?: writable_until=(\d+))?`)

// applies reads the apply intervals a replica logged, across its restarts
// (its log goes on in the same file). An apply it started but never ended
// (it was killed) ended at ended(its start). An apply whose gate closed
// before it ended (its replica was paused past its hold: writable_until)
// wrote nothing after the gate closed, and ends there.
func applies(t *testing.T, r *roleProcess, ended func(start int64) int64) map[string][]interval {
	t.Helper()
	out := map[string][]interval{}
	open := map[string]int64{}
	r.eachMatch(t, applyLine, func(m []string) {
		at, _ := strconv.ParseInt(m[3], 10, 64)
		uid := m[1]
		start, isOpen := open[uid]
		switch {
		case m[2] == "end" && isOpen:
			if until, err := strconv.ParseInt(m[4], 10, 64); err == nil {
				at = min(at, until)
			}
			out[uid] = append(out[uid], interval{r.name, start, at})
			delete(open, uid)
		case m[2] == "start" && isOpen: // the replica was killed meanwhile
			out[uid] = append(out[uid], interval{r.name, start, ended(start)})
			open[uid] = at
		case m[2] == "start":
			open[uid] = at
		}
	})
	for uid, start := range open {
		out[uid] = append(out[uid], interval{r.name, start, ended(start)})
	}
	return out
}

// overlaps describes the applies of one parent, ivs, that overlap.
func overlaps(ivs []interval) []string {
	slices.SortFunc(ivs, func(a, b interval) int { return cmp.Compare(a.start, b.start) })
	var found []string
	last := ivs[0] // of the applies before, the one that ends last
	for _, iv := range ivs[1:] {
		if iv.start < last.end {
			found = append(found, fmt.Sprintf("apply by %s started at %d while one by %s ran until %d",
				iv.replica, iv.start, last.replica, last.end))
		}
		if iv.end > last.end {
			last = iv
		}
	}
	return found
}

// TestAppliersNeverOverlap runs three applier processes on one bus while
// parents keep changing: replicas are added one by one and one is killed
// (SIGKILL). Every apply's start and end, per parent, across all replicas,
// shows no two applies of one parent at once; every parent converges.
func TestAppliersNeverOverlap(t *testing.T) {
	ctx := t.Context()
	srv, err := testbed.StartNATS(ctx, filepath.Join(t.TempDir(), "nats"), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	b := newRolesOnBus(t, srv.URL(), "--partitions", "8")
	ns := b.ns
	b.start("dispatcher", "dispatcher")
	b.start("watcher", "watcher", "--leader-elect=false")
	appliers := []*roleProcess{b.start("applier-1", "applier")}

	const parents = 40
	uids := map[types.UID]string{}
	for i := range parents {
		got := b.createWidget(fmt.Sprintf("w-%02d", i), "0")
		uids[got.GetUID()] = got.GetName()
	}
	// Keep every parent changing while replicas come and go.
	stop := make(chan struct{})
	var round int
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for round = 1; ; round++ {
			for i := range parents {
				patch := fmt.Sprintf(`{"spec":{"value":"%d"}}`, round)
				_, _ = env.dyn.Resource(widgetGVR).Namespace(ns).Patch(ctx, fmt.Sprintf("w-%02d", i), types.MergePatchType, []byte(patch), metav1.PatchOptions{})
			}
			select {
			case <-stop:
				return
			default:
			}
		}
	}()
	acquired := func(r *roleProcess) func() error {
		return func() error {
			if !r.logHas("partition acquired") {
				return fmt.Errorf("%s holds no partition yet", r.name)
			}
			return nil
		}
	}
	if !t.Run("each replica added takes partitions", func(t *testing.T) {
		eventually(t, time.Minute, acquired(appliers[0]))
		for _, name := range []string{"applier-2", "applier-3"} {
			r := b.start(name, "applier")
			appliers = append(appliers, r)
			eventually(t, time.Minute, acquired(r))
		}
	}) {
		return
	}
	var killedAt int64 // when applier-1 was killed, in Unix nanoseconds
	if !t.Run("the survivors take over a killed replica's partitions", func(t *testing.T) {
		appliers[0].proc.Kill()
		killedAt = time.Now().UnixNano()
		t.Log("applier-1 killed")
		// Let the survivors take over applier-1's partitions under load.
		eventually(t, time.Minute, func() error {
			for _, r := range appliers[1:] {
				if !r.logHas("partition acquired") {
					return fmt.Errorf("%s holds nothing", r.name)
				}
			}
			return nil
		})
	}) {
		return
	}
	if !t.Run("every parent converges", func(t *testing.T) {
		close(stop)
		wg.Wait()
		var names []string
		for _, n := range uids {
			names = append(names, n)
		}
		eventually(t, 2*time.Minute, b.converged(strconv.Itoa(round), names...))
	}) {
		return
	}

	t.Run("no two applies of one parent at once", func(t *testing.T) {
		now := time.Now().UnixNano()
		all := map[string][]interval{}
		perReplica := map[string]map[string]bool{}
		for i, r := range appliers {
			until := now
			if i == 0 {
				until = killedAt
			}
			for uid, ivs := range applies(t, r, func(int64) int64 { return until }) {
				if _, ours := uids[types.UID(uid)]; !ours {
					continue
				}
				all[uid] = append(all[uid], ivs...)
				if perReplica[r.name] == nil {
					perReplica[r.name] = map[string]bool{}
				}
				perReplica[r.name][uid] = true
			}
		}
		total := 0
		for uid, ivs := range all {
			total += len(ivs)
			for _, o := range overlaps(ivs) {
				t.Errorf("parent %s: %s", uids[types.UID(uid)], o)
			}
		}
		for _, r := range appliers {
			t.Logf("%s applied %d of the %d parents", r.name, len(perReplica[r.name]), parents)
		}
		t.Logf("%d applies of %d parents over %d rounds of changes, no overlap found", total, parents, round)
		if total < parents*2 {
			t.Fatalf("only %d applies recorded: the logs do not show the applies", total)
		}
	})
}
