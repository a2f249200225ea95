package applier

import (
	"errors"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"universalcontroller.dev/uc/core"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// TestHoldRecreateLoops plays the applies of one parent whose Service
// child is updated by Recreate: a drift healed by one re-creation is
// healed again later; re-creations in a row for one desired state stop
// after maxRecreations, reported once; a new desired state, or a cache
// behind a delete, does not count as another; in-place updates and
// creates are never held.
func TestHoldRecreateLoops(t *testing.T) {
	svc := &core.Child{Resource: core.Resource{GVR: schema.GroupVersionResource{Version: "v1", Resource: "services"}}}
	object := func(uid types.UID, hash string) *unstructured.Unstructured {
		o := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Service"}}
		o.SetNamespace("ns")
		o.SetName("svc")
		o.SetUID(uid)
		o.SetAnnotations(map[string]string{v1alpha1.AnnotationAppliedHash: hash})
		return o
	}
	// recreate is the plan's re-creation of the live child uid made for
	// hash, for the same desired state (drift) or another.
	recreate := func(uid types.UID, hash string, drift bool) core.Write {
		w := core.Write{Verb: core.VerbDelete, Child: svc, Object: object(uid, hash), Event: "Recreating"}
		if drift {
			w.Drift = "spec.ports[0].targetPort: desired 0, live 80"
		}
		return w
	}
	create := core.Write{Verb: core.VerbCreate, Child: svc, Object: object("", "h"), Event: "Created"}
	update := core.Write{Verb: core.VerbApply, Child: svc, Object: object("", "h"), Event: core.EventUpdated}
	deleting := object("u1", "h")
	now := metav1.Now()
	deleting.SetDeletionTimestamp(&now)

	type apply struct {
		writes []core.Write
		live   *unstructured.Unstructured // the child in the cache when no write is planned for it
		kept   int
		held   []bool // tripped, of each held
	}
	tests := []struct {
		name    string
		applies []apply
	}{
		{"a drift healed is healed again", []apply{
			{writes: []core.Write{recreate("u1", "h", true)}, kept: 1},
			{writes: []core.Write{create}, kept: 1},
			{live: object("u2", "h")}, // holds its desired state
			{writes: []core.Write{recreate("u2", "h", true)}, kept: 1},
			{writes: []core.Write{create}, kept: 1},
			{live: object("u3", "h")},
			{writes: []core.Write{recreate("u3", "h", true)}, kept: 1},
		}},
		{"re-creations in a row stop", []apply{
			{writes: []core.Write{recreate("u1", "h", true)}, kept: 1},
			{writes: []core.Write{recreate("u1", "h", true)}, kept: 1}, // the cache behind the delete
			{writes: []core.Write{create}, kept: 1},
			{writes: []core.Write{recreate("u2", "h", true)}, kept: 1},
			{writes: []core.Write{create}, kept: 1},
			{writes: []core.Write{recreate("u3", "h", true)}, held: []bool{true}},
			{writes: []core.Write{recreate("u3", "h", true), update}, kept: 1, held: []bool{false}},
		}},
		{"a child being deleted is still being re-created", []apply{
			{writes: []core.Write{recreate("u1", "h", true)}, kept: 1},
			{live: deleting},
			{writes: []core.Write{create}, kept: 1},
			{writes: []core.Write{recreate("u2", "h", true)}, kept: 1},
			{writes: []core.Write{create}, kept: 1},
			{writes: []core.Write{recreate("u3", "h", true)}, held: []bool{true}},
		}},
		{"a new desired state is re-created", []apply{
			{writes: []core.Write{recreate("u1", "h", true)}, kept: 1},
			{writes: []core.Write{create}, kept: 1},
			{writes: []core.Write{recreate("u2", "h", true)}, kept: 1},
			{writes: []core.Write{create}, kept: 1},
			{writes: []core.Write{recreate("u3", "h", true)}, held: []bool{true}},
			{writes: []core.Write{recreate("u3", "h", false)}, kept: 1},
			{writes: []core.Write{create}, kept: 1},
			{writes: []core.Write{recreate("u4", "h2", true)}, kept: 1},
			{writes: []core.Write{create}, kept: 1},
			{writes: []core.Write{recreate("u5", "h2", true)}, kept: 1},
			{writes: []core.Write{create}, kept: 1},
			{writes: []core.Write{recreate("u6", "h2", true)}, held: []bool{true}},
		}},
		{"in-place updates are never held", []apply{
			{writes: []core.Write{update}, kept: 1},
			{writes: []core.Write{update}, kept: 1},
			{writes: []core.Write{update}, kept: 1},
			{writes: []core.Write{update}, kept: 1},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parents := newKnownParents()
			for i, a := range tt.applies {
				kept, held := parents.holdRecreateLoops("parent", a.writes, liveChild{a.live})
				tripped := make([]bool, 0, len(held))
				for _, h := range held {
					tripped = append(tripped, h.tripped)
				}
				if len(kept) != a.kept || !slices.Equal(tripped, append([]bool{}, a.held...)) {
					t.Fatalf("apply %d: kept %d, held (tripped) %v; want %d, %v", i, len(kept), tripped, a.kept, a.held)
				}
			}
		})
	}
	t.Run("a parent forgotten forgets its count", func(t *testing.T) {
		parents := newKnownParents()
		parents.holdRecreateLoops("parent", []core.Write{recreate("u1", "h", true)}, liveChild{})
		parents.forget("parent")
		if len(parents.recreated) != 0 {
			t.Errorf("recreated = %v after forget", parents.recreated)
		}
	})
}

// liveChild is a cache holding one child, or none.
type liveChild struct{ obj *unstructured.Unstructured }

func (c liveChild) Owned(schema.GroupVersionResource, string, types.UID) ([]*unstructured.Unstructured, error) {
	return nil, nil
}

func (c liveChild) Orphans(schema.GroupVersionResource, string, labels.Selector) ([]*unstructured.Unstructured, error) {
	return nil, nil
}

func (c liveChild) Object(_ schema.GroupVersionResource, namespace, name string) (*unstructured.Unstructured, error) {
	if c.obj == nil || c.obj.GetNamespace() != namespace || c.obj.GetName() != name {
		return nil, errors.New("not found")
	}
	return c.obj, nil
}
