package applier

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"

	"universalcontroller.dev/uc/core"
	"universalcontroller.dev/uc/core/coretest"
	"universalcontroller.dev/uc/internal/tracing"
	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// TestRecordWrites: one Normal Event per reply names the children created,
// deleted, adopted or released; in-place updates are not recorded.
func TestRecordWrites(t *testing.T) {
	cms := &core.Child{}
	cms.GVK = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	act := func(event, name string) core.Write {
		o := &unstructured.Unstructured{}
		o.SetNamespace("ns")
		o.SetName(name)
		return core.Write{Child: cms, Object: o, Event: event}
	}
	for _, tc := range []struct {
		name string
		done []core.Write
		want []string
	}{
		{"nothing", nil, nil},
		{"creates", []core.Write{act("Created", "a"), act("Created", "b")},
			[]string{"Normal Created Created ConfigMap ns/a, Created ConfigMap ns/b"}},
		{"updates only", []core.Write{act(core.EventUpdated, "a"), act(core.EventUpdated, "b")}, nil},
		{"mixed", []core.Write{act(core.EventUpdated, "a"), act("Created", "b"), act("Deleted", "c")},
			[]string{"Normal Applied Created ConfigMap ns/b, Deleted ConfigMap ns/c"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := record.NewFakeRecorder(10)
			w := &writer{events: rec, tracer: tracing.Tracer(nil)}
			w.recordWrites(&unstructured.Unstructured{}, tc.done)
			close(rec.Events)
			var got []string
			for e := range rec.Events {
				got = append(got, e)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("events %q, want %q", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("event %q, want %q", got[i], tc.want[i])
				}
			}
		})
	}
}

// TestReportFailing: an apply that keeps failing and is retried is
// reported on the parent at its third failure in a row — a Warning Event
// and a Synced=False condition naming the error — and not again for the
// same error: the Event once per distinct error, the condition again for a
// new generation. After an apply succeeds, a failure counts from one
// again. A decorated object gets the Event, never a condition.
func TestReportFailing(t *testing.T) {
	ctl := coretest.Controller(v1alpha1.ChildUpdateInPlace)
	conflict := fmt.Errorf("create configmaps ns/c: %w", apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, "c", errors.New("try again")))
	down := fmt.Errorf("create configmaps ns/c: %w", apierrors.NewInternalError(errors.New(`failed calling webhook "policy.example.com": connection refused`)))
	type step struct {
		err        error // nil: the apply succeeds
		generation int64
		wantEvent  string // the error the Warning Event names, if one is recorded
		wantStatus string // the error the Synced=False condition names, if one is written
	}
	for _, tc := range []struct {
		name                      string
		decorator, metacontroller bool
		steps                     []step
	}{
		{"controller", false, false, []step{
			{conflict, 1, "", ""},
			{conflict, 1, "", ""},
			{conflict, 1, "try again", "try again"},
			{conflict, 1, "", ""},
			{conflict, 2, "", "try again"},
			{down, 2, "connection refused", "connection refused"},
			{down, 2, "", ""},
			{nil, 2, "", ""},
			{down, 2, "", ""},
			{down, 2, "", ""},
			{down, 2, "connection refused", "connection refused"},
		}},
		{"decorator", true, false, []step{
			{conflict, 1, "", ""},
			{conflict, 1, "", ""},
			{conflict, 1, "try again", ""},
			{conflict, 2, "", ""},
		}},
		// Metacontroller's Event reason, SyncError; uc's reason leads its
		// message.
		{"Metacontroller's controller", false, true, []step{
			{down, 1, "", ""},
			{down, 1, "", ""},
			{down, 1, "Sync error: ApplyFailed: the apply keeps failing", "connection refused"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var synced []map[string]any // the Synced conditions written
			parent, dyn := fakeParent(ctl, func(status map[string]any) error {
				synced = append(synced, core.FindCondition(status["conditions"], v1alpha1.ConditionSynced))
				return nil
			})
			rec := record.NewFakeRecorder(100)
			rc := testReconciler(dyn, rec)
			failures := map[types.UID]int{} // failed applies in a row, as the worker loop counts them
			rc.failures = func(key types.UID) int { return failures[key] }
			c := *ctl
			if tc.decorator {
				c = core.Controller{Name: ctl.Name, Parent: ctl.Parent, Decorator: &core.Decoration{}}
			}
			c.Metacontroller = tc.metacontroller
			reason := "ApplyFailed"
			if tc.metacontroller {
				reason = "SyncError"
			}
			m := bus.Meta{Address: bus.Address{Controller: ctl.Name, Hook: hooks.Sync, ParentUID: "uid"}, Namespace: "ns", Name: "p"}
			for i, s := range tc.steps {
				m.Generation = s.generation
				synced = nil
				// As an apply and the worker loop do.
				if s.err == nil {
					delete(failures, m.ApplyKey())
					rc.failing.forget(m.ApplyKey())
				} else {
					rc.reportFailing(t.Context(), rc.log, &c, parent, m, s.err, !tc.decorator)
					failures[m.ApplyKey()]++
				}
				var events []string
				for len(rec.Events) > 0 {
					events = append(events, <-rec.Events)
				}
				switch {
				case s.wantEvent == "" && len(events) > 0:
					t.Errorf("step %d: events %q, want none", i, events)
				case s.wantEvent != "" && (len(events) != 1 || !strings.HasPrefix(events[0], "Warning "+reason+" ") || !strings.Contains(events[0], s.wantEvent)):
					t.Errorf("step %d: events %q, want one Warning %s naming %q", i, events, reason, s.wantEvent)
				}
				switch {
				case s.wantStatus == "" && len(synced) > 0:
					t.Errorf("step %d: Synced conditions written %v, want none", i, synced)
				case s.wantStatus != "" && (len(synced) != 1 || synced[0]["status"] != "False" || synced[0]["reason"] != "ApplyFailed" ||
					synced[0]["observedGeneration"] != float64(s.generation) || !strings.Contains(fmt.Sprint(synced[0]["message"]), s.wantStatus)):
					t.Errorf("step %d: Synced conditions written %v, want one False/ApplyFailed at generation %d naming %q", i, synced, s.generation, s.wantStatus)
				}
			}
		})
	}
}
