package topology_test

import (
	"fmt"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"universalcontroller.dev/uc/internal/bustest"
	"universalcontroller.dev/uc/internal/topology"
	"universalcontroller.dev/uc/schemas/bus"
)

// TestDeadLettersKeptPerParent: a parent whose hook keeps failing leaves a
// dead letter per retry; the stream keeps its last few, and those of
// other parents.
func TestDeadLettersKeptPerParent(t *testing.T) {
	js := bustest.JetStream(t)
	ctx := t.Context()
	failing := bus.Address{Controller: "c", Hook: "sync", Partition: 1, ParentUID: "failing"}
	other := bus.Address{Controller: "c", Hook: "sync", Partition: 1, ParentUID: "other"}
	for i := range 3 * topology.MaxDeadLettersPerParent {
		if _, err := js.Publish(ctx, failing.DeadLetterSubject(), fmt.Appendf(nil, "retry %d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := js.Publish(ctx, other.DeadLetterSubject(), []byte("once")); err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(ctx, bus.DeadLetterStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(bus.DeadLetterPrefix+".>"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]uint64{failing.DeadLetterSubject(): topology.MaxDeadLettersPerParent, other.DeadLetterSubject(): 1}
	for subject, n := range want {
		if got := info.State.Subjects[subject]; got != n {
			t.Errorf("%s: %d dead letters kept, want %d", subject, got, n)
		}
	}
	last, err := s.GetLastMsgForSubject(ctx, failing.DeadLetterSubject())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(last.Data), fmt.Sprintf("retry %d", 3*topology.MaxDeadLettersPerParent-1); got != want {
		t.Errorf("the last dead letter kept is %q, want %q", got, want)
	}
}
