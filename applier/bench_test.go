package applier

import (
	"encoding/json"
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// BenchmarkApplyPlan measures what the applier does for every reply before
// it writes: decode the reply (5 ConfigMaps), claim the live children and
// diff each against its desired object, for a parent whose children do not
// exist yet, are as desired, and have another payload.
func BenchmarkApplyPlan(b *testing.B) {
	ctl := testController(v1alpha1.ChildUpdateInPlace)
	parent := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Parent"}}
	parent.SetNamespace("ns")
	parent.SetName("p")
	parent.SetUID("parent-uid")
	reply := func(payload string) *reply {
		resp := hooks.SyncResponse{Status: map[string]any{"children": 5}}
		for i := range 5 {
			resp.Children = append(resp.Children, object("ConfigMap", "", fmt.Sprintf("p-%d", i), map[string]any{"payload": payload}, ""))
		}
		data, err := json.Marshal(resp)
		if err != nil {
			b.Fatal(err)
		}
		return &reply{meta: bus.Meta{Address: bus.Address{Hook: hooks.Sync}}, typ: bus.ResponseType(hooks.Sync), data: data}
	}
	// live is the children as the applier applied them with payload.
	live := func(payload string) fakeLive {
		var out fakeLive
		for _, d := range reply(payload).decoded(b).Children {
			o, err := desiredObject(ctl, parent, &ctl.Children[0], d, ownerRef(ctl, parent))
			if err != nil {
				b.Fatal(err)
			}
			o.SetUID(types.UID("uid-" + o.GetName()))
			out = append(out, o)
		}
		return out
	}
	for _, bc := range []struct {
		name   string
		live   fakeLive
		writes int
	}{{"create", nil, 5}, {"unchanged", live("one"), 0}, {"update", live("two"), 5}} {
		b.Run(bc.name, func(b *testing.B) {
			r := reply("one")
			b.ReportAllocs()
			for b.Loop() {
				actions, err := plan(ctl, parent, r.decoded(b), bc.live)
				if err != nil || len(actions) != bc.writes {
					b.Fatalf("%d writes (err %v), want %d", len(actions), err, bc.writes)
				}
			}
		})
	}
}

func (r *reply) decoded(b *testing.B) *hooks.SyncResponse {
	resp, err := decodeReply[hooks.SyncResponse](r, true)
	if err != nil {
		b.Fatal(err)
	}
	return resp
}
