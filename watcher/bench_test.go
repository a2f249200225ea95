package watcher

import (
	"context"
	"fmt"
	"testing"

	"github.com/cloudevents/sdk-go/v2/event"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"universalcontroller.dev/uc/core"
	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
)

// BenchmarkSyncRequest measures what the watcher does for every request and
// a hook worker undoes: build a sync request of a parent with 5 ConfigMaps,
// identify what it observed, encode it as a CloudEvent on a NATS message,
// and decode it again.
func BenchmarkSyncRequest(b *testing.B) {
	ctl := fixtureController(b, "bench", "v2", resource("example.com", "v1", "Parent", "parents", true), configMaps)
	parent := obj(b, `
apiVersion: example.com/v1
kind: Parent
metadata: {name: p, namespace: ns, uid: `+parentUID+`, generation: 2, resourceVersion: "300"}
spec: {replicas: 5, payload: "a payload of some forty characters......"}
status: {children: 5, observedGeneration: 2}
`)
	claimed := make([][]*unstructured.Unstructured, 1)
	for i := range 5 {
		claimed[0] = append(claimed[0], child(b, "v1", "ConfigMap", "ns", fmt.Sprintf("p-%d", i),
			`data: {payload: "a payload of some forty characters......"}`))
	}
	meta := bus.Meta{Address: bus.Address{Controller: ctl.Name, Hook: hooks.Sync, ParentUID: parent.GetUID()},
		Namespace: "ns", Name: "p", Generation: 2, ResourceVersion: "300", Observation: 1}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		req := core.NewSyncRequest(ctl, parent, claimed, nil, "v2", false)
		e := event.New()
		e.SetType(bus.RequestType(hooks.Sync))
		e.SetSource("/universalcontroller/bench")
		if err := e.SetData(event.ApplicationJSON, req); err != nil {
			b.Fatal(err)
		}
		e.SetID(eventID("subject", e.Type(), observed(ctl, req), false))
		meta.SetOn(&e)
		msg, err := bus.ToMsg(ctx, "subject", &e)
		if err != nil {
			b.Fatal(err)
		}
		got, err := bus.FromMsg(ctx, msg.Subject, msg.Header, msg.Data)
		if err != nil {
			b.Fatal(err)
		}
		var decoded hooks.SyncRequest
		if err := got.DataAs(&decoded); err != nil {
			b.Fatal(err)
		}
	}
}
