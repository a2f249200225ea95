package applier

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"universalcontroller.dev/uc/internal/shares"
	"universalcontroller.dev/uc/internal/topology"
	"universalcontroller.dev/uc/internal/verdict"
	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
)

// busMsg is a message as a consumer delivers it, counting how it is
// settled.
type busMsg struct {
	jetstream.Msg
	msg                            *nats.Msg
	seq                            uint64 // its stream sequence
	acked, naked, inProgress, gone atomic.Int32
}

func (m *busMsg) Subject() string      { return m.msg.Subject }
func (m *busMsg) Headers() nats.Header { return m.msg.Header }
func (m *busMsg) Data() []byte         { return m.msg.Data }
func (m *busMsg) Ack() error           { m.acked.Add(1); return nil }
func (m *busMsg) Nak() error           { m.naked.Add(1); return nil }
func (m *busMsg) InProgress() error    { m.inProgress.Add(1); return nil }
func (m *busMsg) Term() error          { m.gone.Add(1); return nil }
func (m *busMsg) Metadata() (*jetstream.MsgMetadata, error) {
	return &jetstream.MsgMetadata{Sequence: jetstream.SequencePair{Stream: m.seq}}, nil
}

// settled says how m was settled: "acked", "naked", "in progress",
// "terminated", "" when not yet, or each way it was.
func (m *busMsg) settled() string {
	var out []string
	for _, s := range []struct {
		n    *atomic.Int32
		what string
	}{{&m.acked, "acked"}, {&m.naked, "naked"}, {&m.inProgress, "in progress"}, {&m.gone, "terminated"}} {
		if s.n.Load() > 0 {
			out = append(out, s.what)
		}
	}
	return fmt.Sprint(out)
}

// replyMsg is the reply of m's observation, as the bus delivers it with
// stream sequence seq.
func replyMsg(t *testing.T, m bus.Meta, seq uint64) *busMsg {
	t.Helper()
	e := event.New()
	e.SetID(fmt.Sprint("reply-", seq))
	e.SetType(bus.ResponseType(m.Hook))
	e.SetSource("/test")
	m.SetOn(&e)
	if err := e.SetData(event.ApplicationJSON, map[string]any{}); err != nil {
		t.Fatal(err)
	}
	msg, err := bus.ToMsg(context.Background(), m.ReplySubject(), &e)
	if err != nil {
		t.Fatal(err)
	}
	return &busMsg{msg: msg, seq: seq}
}

// fakeReconciler records the batches intake hands it, and fails them
// while fail is set (with failWith, if set). during, if set, runs during
// each apply.
type fakeReconciler struct {
	applied  []int64 // the observations applied, in order
	shadows  int
	fail     bool
	failWith error
	during   func()
}

func (f *fakeReconciler) apply(ctx context.Context, parents *knownParents, b *batch) error {
	if parents == nil {
		return errors.New("no partition's parents")
	}
	if f.during != nil {
		f.during()
	}
	f.applied = append(f.applied, b.meta.Observation)
	if f.fail && f.failWith != nil {
		return f.failWith
	}
	if f.fail {
		return errors.New("the apiserver is down")
	}
	return nil
}

func (f *fakeReconciler) receiveShadow(*reply) { f.shadows++ }

// testIntake is an intake holding partition 0, handing its batches to a
// fake reconciler.
func testIntake(t *testing.T) (*intake, *fakeReconciler) {
	t.Helper()
	rec := &fakeReconciler{}
	in := newIntake(rec, nobody{}, 16, slog.New(slog.DiscardHandler))
	t.Cleanup(in.shutDown)
	in.hold(newPartition(0, nil, shares.NewHold(time.Now()), allCached{}))
	return in, rec
}

// next runs the worker loop once, over the next parent queued, once it is
// (a retry comes after its backoff).
func next(t *testing.T, in *intake) {
	t.Helper()
	queued := func(context.Context) (bool, error) { return in.queue.Len() > 0, nil }
	if err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 5*time.Second, true, queued); err != nil {
		t.Fatalf("no parent queued: %v", err)
	}
	if !in.loop().Next(t.Context(), in.queue) {
		t.Fatal("the worker loop stopped")
	}
}

func observation(n int64) bus.Meta {
	return bus.Meta{Address: bus.Address{Controller: "c", Hook: hooks.Sync, ParentUID: "uid"}, Namespace: "ns", Name: "p", Observation: n}
}

// TestIntakeAppliesTheNewestObservation: of the replies waiting for a
// parent, only the newest observation's is applied; an older one, come
// before or after it, is acknowledged unapplied.
func TestIntakeAppliesTheNewestObservation(t *testing.T) {
	in, rec := testIntake(t)
	msgs := map[int64]*busMsg{}
	for n := range int64(4) {
		msgs[n+1] = replyMsg(t, observation(n+1), uint64(n+1))
	}
	in.receive(msgs[2])
	in.receive(msgs[1]) // older than the one waiting
	next(t, in)
	in.receive(msgs[3])
	in.receive(msgs[4]) // supersedes 3
	next(t, in)
	if !slices.Equal(rec.applied, []int64{2, 4}) {
		t.Errorf("applied observations %v, want 2 then 4", rec.applied)
	}
	for n, m := range msgs {
		if got := m.settled(); got != "[acked]" {
			t.Errorf("observation %d: %s, want acked", n, got)
		}
	}
	if in.queue.Len() != 0 {
		t.Errorf("%d parents still queued", in.queue.Len())
	}
}

// TestIntakeWaitsForEveryRevision: a rolling controller's replies are
// applied once every revision asked about has its reply.
func TestIntakeWaitsForEveryRevision(t *testing.T) {
	in, rec := testIntake(t)
	latest := observation(1)
	latest.Revisions = []string{"new", "old"}
	older := latest
	older.Revision = "old"
	in.receive(replyMsg(t, latest, 1))
	if in.queue.Len() != 0 {
		t.Fatal("a parent was queued with a revision's reply missing")
	}
	in.receive(replyMsg(t, older, 2))
	next(t, in)
	if !slices.Equal(rec.applied, []int64{1}) {
		t.Errorf("applied observations %v, want 1", rec.applied)
	}
}

// TestIntakePutsFailedRepliesBack: replies whose apply failed are kept in
// progress for the retry, unless newer replies came during the apply:
// then those are applied, and the failed ones acknowledged. A partition
// this replica no longer holds gives its replies back to the bus.
func TestIntakePutsFailedRepliesBack(t *testing.T) {
	for _, tc := range []struct {
		name string
		// meanwhile is the reply that comes during the failed apply of
		// failed; nil: none.
		meanwhile func(t *testing.T, failed *busMsg) *busMsg
		// How failed is settled once its apply failed, and once the next
		// apply succeeded; the observations applied.
		afterFailure, afterNext string
		applied                 []int64
	}{
		{"retried", nil, "[in progress]", "[acked in progress]", []int64{1, 1}},
		{"newer replies came meanwhile", func(t *testing.T, _ *busMsg) *busMsg { return replyMsg(t, observation(2), 2) },
			"[acked]", "[acked]", []int64{1, 2}},
		{"the same replies again meanwhile", func(_ *testing.T, failed *busMsg) *busMsg { return failed }, // redelivered
			"[]", "[acked]", []int64{1, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, rec := testIntake(t)
			failed := replyMsg(t, observation(1), 1)
			next2 := failed // the reply of the next apply
			if tc.meanwhile != nil {
				next2 = tc.meanwhile(t, failed)
				rec.during = func() { in.receive(next2) }
			}
			rec.fail = true
			in.receive(failed)
			next(t, in)
			if got := failed.settled(); got != tc.afterFailure {
				t.Errorf("the failed reply: %s, want %s", got, tc.afterFailure)
			}
			rec.fail, rec.during = false, nil
			next(t, in) // after its backoff, or at once for replies that came meanwhile
			if got := failed.settled(); got != tc.afterNext || !slices.Equal(rec.applied, tc.applied) {
				t.Errorf("after the next apply: the failed reply %s, applied %v; want %s, %v", got, rec.applied, tc.afterNext, tc.applied)
			}
			if got := next2.settled(); !strings.HasPrefix(got, "[acked") {
				t.Errorf("the reply applied next: %s, want acked", got)
			}
		})
	}
	t.Run("partition released", func(t *testing.T) {
		in, rec := testIntake(t)
		msg := replyMsg(t, observation(1), 1)
		in.receive(msg)
		in.drop(0)
		next(t, in)
		if got := msg.settled(); got != "[naked]" || len(rec.applied) > 0 {
			t.Errorf("a reply of a partition released: %s, applied %v; want given back unapplied", got, rec.applied)
		}
	})
	t.Run("hold lapsed", func(t *testing.T) {
		in, rec := testIntake(t)
		lapsed := shares.NewHold(time.Now().Add(-topology.LeaseTTL))
		<-lapsed.Context().Done()
		in.drop(0)
		in.hold(newPartition(0, nil, lapsed, allCached{}))
		msg := replyMsg(t, observation(1), 1)
		in.receive(msg)
		next(t, in)
		if got := msg.settled(); got != "[naked]" || len(rec.applied) > 0 {
			t.Errorf("a reply of a partition whose hold lapsed: %s, applied %v; want given back unapplied", got, rec.applied)
		}
	})
}

// TestIntakeSetsShadowsAside: a reply of a sync hook's shadow is
// acknowledged and handed to the reconciler's comparison, never applied;
// a message that is not a uc reply is terminated.
func TestIntakeSetsShadowsAside(t *testing.T) {
	in, rec := testIntake(t)
	m := observation(1)
	m.Hook = hooks.SyncShadow
	shadow := replyMsg(t, m, 1)
	in.receive(shadow)
	garbage := &busMsg{msg: &nats.Msg{Subject: "uc.reply.c.sync.0.uid", Data: []byte("{}")}}
	in.receive(garbage)
	if got := shadow.settled(); got != "[acked]" || rec.shadows != 1 || in.queue.Len() != 0 {
		t.Errorf("a shadow's reply: %s, %d compared, %d queued; want acked and compared only", got, rec.shadows, in.queue.Len())
	}
	if got := garbage.settled(); got != "[terminated]" {
		t.Errorf("a message that is no reply: %s, want terminated", got)
	}
}

// failures is an Observer that counts the applies it is told failed.
type failures struct {
	nobody
	n int
}

func (f *failures) Failed(bus.Meta) { f.n++ }

// TestIntakeReadsTheVerdict: an apply that failed is logged as an error,
// told to the Observer, and retried; one that waits (a controller not
// registered here yet, a conflict or a lapsed hold, which the reconciler
// marks so) is retried too, its replies kept, and counted as the applies
// that failed in a row are (reportFailing reads the count), but it is no
// failure: logged at debug level, not told.
func TestIntakeReadsTheVerdict(t *testing.T) {
	conflict := apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, "c", errors.New("the object has been modified"))
	for _, tc := range []struct {
		name    string
		err     error
		failure bool
	}{
		{"failed", errors.New("the apiserver is down"), true},
		{"not registered here yet", fmt.Errorf("controller c: %w", errNotRegisteredYet), false},
		{"met a newer object", verdict.Wait.Mark(fmt.Errorf("apply configmaps ns/c: %w", conflict)), false},
		{"hold lost", fmt.Errorf("apply configmaps ns/c: %w", &shares.Lapsed{Since: time.Second}), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			rec := &fakeReconciler{fail: true, failWith: tc.err}
			observer := &failures{}
			in := newIntake(rec, observer, 16, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
			t.Cleanup(in.shutDown)
			in.hold(newPartition(0, nil, shares.NewHold(time.Now()), allCached{}))
			msg := replyMsg(t, observation(1), 1)
			in.receive(msg)
			next(t, in)
			if got := msg.settled(); got != "[in progress]" {
				t.Errorf("the reply: %s, want kept in progress for the retry", got)
			}
			if got := in.failures(observation(1).ApplyKey()); got != 1 {
				t.Errorf("%d applies failed in a row, want 1", got)
			}
			if got := observer.n == 1; got != tc.failure {
				t.Errorf("the Observer was told of %d failures; a failure: %v", observer.n, tc.failure)
			}
			if got := strings.Contains(logs.String(), `level=ERROR msg="apply failed; will retry"`); got != tc.failure {
				t.Errorf("logged as an error: %v, want %v:\n%s", got, tc.failure, logs.String())
			}
			if !tc.failure && !strings.Contains(logs.String(), `level=DEBUG msg="waits; will retry"`) {
				t.Errorf("a wait is not logged at debug level:\n%s", logs.String())
			}
		})
	}
}

// TestFailedApply: the reconciler marks the error of an apply with what
// the worker loop does with it: a reply the fence dropped is done; one
// that met a newer object or one not cached yet, or whose hold lapsed,
// waits and is logged as news; one of a controller not registered here yet waits quietly; any
// other is a failure, retried.
func TestFailedApply(t *testing.T) {
	conflict := apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, "c", errors.New("the object has been modified"))
	lapsedHold, lapse := context.WithCancelCause(t.Context())
	lapse(fmt.Errorf("%w: released", shares.ErrHoldLost))
	for _, tc := range []struct {
		name    string
		ctx     context.Context
		err     error
		done    bool
		verdict verdict.Verdict
		news    bool
	}{
		{"the fence moved", t.Context(), fmt.Errorf("advance fence: %w (12)", errFenceMoved), true, verdict.Retry, true},
		{"a conflict", t.Context(), fmt.Errorf("apply configmaps ns/c: %w", conflict), false, verdict.Wait, true},
		{"a child not cached yet", t.Context(), fmt.Errorf("create configmaps ns/c: %w", errNotCachedYet), false, verdict.Wait, true},
		{"the hold lapsed", lapsedHold, fmt.Errorf("apply configmaps ns/c: %w", context.Canceled), false, verdict.Wait, true},
		{"the gate closed", t.Context(), fmt.Errorf("apply configmaps ns/c: %w", &shares.Lapsed{Since: time.Second}), false, verdict.Wait, true},
		{"not registered here yet", t.Context(), fmt.Errorf("controller c: %w", errNotRegisteredYet), false, verdict.Wait, false},
		{"the apiserver is down", t.Context(), errors.New("connection refused"), false, verdict.Retry, false},
		{"a timeout", t.Context(), apierrors.NewServerTimeout(schema.GroupResource{Resource: "configmaps"}, "create", 1), false, verdict.Retry, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			err := failedApply(tc.ctx, slog.New(slog.NewTextHandler(&logs, nil)), tc.err)
			if (err == nil) != tc.done {
				t.Fatalf("failedApply = %v; want done: %v", err, tc.done)
			}
			if got := verdict.Of(err); !tc.done && got != tc.verdict {
				t.Errorf("verdict %v, want %v", got, tc.verdict)
			}
			if got := strings.Contains(logs.String(), "level=INFO"); got != tc.news {
				t.Errorf("logged as news: %v, want %v:\n%s", got, tc.news, logs.String())
			}
			if context.Cause(tc.ctx) != nil && !errors.Is(err, shares.ErrHoldLost) {
				t.Errorf("%v does not say the hold lapsed", err)
			}
		})
	}
}

// TestIntakeWaitsForRoom: with maxQueued parents queued for the workers,
// a reply of another parent waits in receive (so its partition's
// consumption pulls nothing more) until a worker takes a parent, or until
// the partition is given up; a reply of a parent already waiting goes in
// at once.
func TestIntakeWaitsForRoom(t *testing.T) {
	in := newIntake(&fakeReconciler{}, nobody{}, 1, slog.New(slog.DiscardHandler))
	t.Cleanup(in.shutDown)
	in.hold(newPartition(0, nil, shares.NewHold(time.Now()), allCached{}))
	parent := func(i int, obs int64) bus.Meta {
		m := observation(obs)
		m.ParentUID = types.UID(fmt.Sprint("uid-", i))
		return m
	}
	seq := uint64(0)
	msg := func(m bus.Meta) *busMsg { seq++; return replyMsg(t, m, seq) }
	for i := range in.maxQueued {
		in.receive(msg(parent(i, 1)))
	}
	if in.queue.Len() != in.maxQueued {
		t.Fatalf("%d parents queued, want %d", in.queue.Len(), in.maxQueued)
	}

	// receiveAside receives a reply of a new parent, which waits.
	receiveAside := func(i int) <-chan struct{} {
		done := make(chan struct{})
		go func() { in.receive(msg(parent(i, 1))); close(done) }()
		if err := wait.PollUntilContextTimeout(t.Context(), 5*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
			in.mu.Lock()
			defer in.mu.Unlock()
			return in.waiting == 1, nil
		}); err != nil {
			t.Fatalf("the reply of a new parent did not wait for room: %v", err)
		}
		return done
	}
	done := receiveAside(100)

	in.receive(msg(parent(0, 2))) // a parent waiting: no wait
	if got := in.pendingMeta(types.UID("uid-0")).Observation; got != 2 {
		t.Errorf("parent waiting: observation %d pending, want 2", got)
	}
	if in.pendingMeta("uid-100").Name != "" {
		t.Fatal("the reply of a new parent went in with the queue full")
	}

	next(t, in) // a worker takes a parent: room for one
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting reply did not go in once a worker took a parent")
	}
	if in.pendingMeta("uid-100").Name == "" {
		t.Error("the reply that waited is not pending")
	}

	done = receiveAside(101)
	in.drop(0)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting reply did not go in once its partition was given up")
	}
}
