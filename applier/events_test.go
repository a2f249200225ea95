package applier

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/record"

	"universalcontroller.dev/uc/internal/registry"
)

// TestRecordWrites: one Normal Event per reply names the children created,
// deleted, adopted or released; in-place updates are not recorded.
func TestRecordWrites(t *testing.T) {
	cms := &registry.Child{}
	cms.GVK = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	act := func(event, name string) action {
		o := &unstructured.Unstructured{}
		o.SetNamespace("ns")
		o.SetName(name)
		return action{child: cms, obj: o, event: event}
	}
	for _, tc := range []struct {
		name string
		done []action
		want []string
	}{
		{"nothing", nil, nil},
		{"creates", []action{act("Created", "a"), act("Created", "b")},
			[]string{"Normal Created Created ConfigMap ns/a, Created ConfigMap ns/b"}},
		{"updates only", []action{act(eventUpdated, "a"), act(eventUpdated, "b")}, nil},
		{"mixed", []action{act(eventUpdated, "a"), act("Created", "b"), act("Deleted", "c")},
			[]string{"Normal Applied Created ConfigMap ns/b, Deleted ConfigMap ns/c"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := record.NewFakeRecorder(10)
			a := &Applier{events: rec}
			a.recordWrites(&unstructured.Unstructured{}, tc.done)
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
