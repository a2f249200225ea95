package core

import (
	"encoding/json"
	"fmt"
	"runtime"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// BenchmarkApplyPlan measures what the applier does for every reply before
// it writes: decode the reply (5 ConfigMaps, and 1000: the default most a
// reply may have), claim the live children and diff each against its
// desired object, for a parent whose children do not exist yet, are as
// desired, and have another payload. Besides the allocations per reply, it
// reports held-B/reply: the memory a reply holds once planned, while its
// writes are made — the reply decoded, and the objects its writes carry —
// besides its bytes as received.
func BenchmarkApplyPlan(b *testing.B) {
	ctl := testController(v1alpha1.ChildUpdateInPlace)
	parent := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Parent"}}
	parent.SetNamespace("ns")
	parent.SetName("p")
	parent.SetUID("parent-uid")
	reply := func(children int, payload string) []byte {
		resp := hooks.SyncResponse{Status: map[string]any{"children": children}}
		for i := range children {
			cm := object("ConfigMap", "", fmt.Sprintf("p-%d", i), map[string]any{"payload": payload}, "")
			cm.SetLabels(map[string]string{"app": "fanout", "fanout": "p"})
			resp.Children = append(resp.Children, cm)
		}
		data, err := json.Marshal(resp)
		if err != nil {
			b.Fatal(err)
		}
		return data
	}
	// live is the children as the applier applied them with payload.
	live := func(children int, payload string) indexedLive {
		out := indexedLive{byName: map[string]*unstructured.Unstructured{}}
		for _, d := range decoded(b, reply(children, payload)).Children {
			o, err := desiredObject(ctl, parent, &ctl.Children[0], d, ownerRef(ctl, parent))
			if err != nil {
				b.Fatal(err)
			}
			o.SetUID(types.UID("uid-" + o.GetName()))
			out.fakeLive = append(out.fakeLive, o)
			out.byName[o.GetNamespace()+"/"+o.GetName()] = o
		}
		return out
	}
	for _, n := range []int{5, 1000} {
		for _, bc := range []struct {
			name   string
			live   indexedLive
			writes int
		}{{"create", live(0, ""), n}, {"unchanged", live(n, "one"), 0}, {"update", live(n, "two"), n}} {
			b.Run(fmt.Sprintf("%d/%s", n, bc.name), func(b *testing.B) {
				r := reply(n, "one")
				// The decoded reply and its writes, as apply holds them.
				type planned struct {
					resp    *hooks.SyncResponse
					actions []Write
				}
				decodeAndPlan := func() planned {
					resp := decoded(b, r)
					actions, err := Plan(ctl, parent, resp, bc.live)
					if err != nil || len(actions) != bc.writes {
						b.Fatalf("%d writes (err %v), want %d", len(actions), err, bc.writes)
					}
					return planned{resp, actions}
				}
				held := heldBy(func() any { return decodeAndPlan() })
				b.ReportAllocs()
				for b.Loop() {
					decodeAndPlan()
				}
				b.ReportMetric(float64(held), "held-B/reply")
			})
		}
	}
}

// indexedLive is a fakeLive of ConfigMaps that finds one by name in a map,
// as the informers' cache does, so a bench of a thousand children
// measures plan, not the fake.
type indexedLive struct {
	fakeLive
	byName map[string]*unstructured.Unstructured // by namespace/name
}

func (l indexedLive) Object(gvr schema.GroupVersionResource, ns, name string) (*unstructured.Unstructured, error) {
	if o, ok := l.byName[ns+"/"+name]; ok {
		return o, nil
	}
	return nil, apierrors.NewNotFound(gvr.GroupResource(), name)
}

// heldBy is the heap that what make returns holds, in bytes.
func heldBy(make func() any) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	held := make()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(held)
	return after.HeapAlloc - min(after.HeapAlloc, before.HeapAlloc)
}

func decoded(b *testing.B, data []byte) *hooks.SyncResponse {
	resp, err := DecodeData[hooks.SyncResponse](hooks.Sync, data, true)
	if err != nil {
		b.Fatal(err)
	}
	return resp
}
