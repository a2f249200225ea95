package core

import (
	"encoding/json"
	"testing"

	"github.com/cloudevents/sdk-go/v2/event"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"universalcontroller.dev/uc/internal/schemacheck"
	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/schemas/jsonschema"
)

// TestPlansAreValid: the plans the applier makes of replies — creating a
// child, updating it, deleting it, a finalize reply — a rejected reply's
// plan, and shadows' plans with their differences, are valid plan.json
// documents, encoded as the applier publishes them.
func TestPlansAreValid(t *testing.T) {
	validator := schemacheck.New(jsonschema.Documents(), jsonschema.BaseURL, jsonschema.FileOf)
	ctl := testController("")
	parent := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Parent"}}
	parent.SetNamespace("ns")
	parent.SetName("p")
	parent.SetUID("uid-p")
	parent.SetGeneration(2)
	parent.SetResourceVersion("48213")
	live := object("ConfigMap", "ns", "c", map[string]any{"k": "old"}, "uid-p")
	want := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "c"}, "data": map[string]any{"k": "new"}}
	encode := func(v any) []byte {
		e := event.New()
		if err := e.SetData(event.ApplicationJSON, v); err != nil {
			t.Fatal(err)
		}
		return e.Data()
	}
	for _, tc := range []struct {
		name   string
		hook   string
		reply  map[string]any
		live   fakeLive
		action string
	}{
		{"create", hooks.Sync, map[string]any{"status": map[string]any{"ready": 0}, "children": []any{want}}, nil, "create"},
		{"update", hooks.Sync, map[string]any{"children": []any{want},
			"events": []any{map[string]any{"type": "Normal", "reason": "Changed", "message": "to new"}}}, fakeLive{live}, "update"},
		{"delete", hooks.Sync, map[string]any{"children": []any{}, "resyncAfterSeconds": 5}, fakeLive{live}, "delete"},
		{"finalize", hooks.Finalize, map[string]any{"children": []any{}, "finalized": true}, fakeLive{live}, "delete"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reply, _ := json.Marshal(tc.reply)
			checked, err := Check(ctl, parent, tc.hook, reply, 10, tc.live)
			if err != nil {
				t.Fatal(err)
			}
			if steps := checked.Plan.Children; len(steps) != 1 || steps[0].Action != tc.action {
				t.Fatalf("planned %+v, want the ConfigMap's %s", steps, tc.action)
			}
			if data := encode(checked.Plan); validator.Validate(bus.PlanType, data) != nil {
				t.Errorf("%v\ndata: %s", validator.Validate(bus.PlanType, data), data)
			}
		})
	}
	rejected := &bus.Plan{Hook: hooks.Sync, RequestID: "r", Generation: 2, ResourceVersion: "48213", Children: []bus.Step{},
		Rejected: &bus.Rejected{Reason: "InvalidHookReply", Message: "sync hook reply rejected: children[0]: kind not declared in childResources"}}
	// A shadow's plan, with its difference from the sync hook's reply.
	shadow := func(d *bus.ShadowDiff) *bus.Plan {
		return &bus.Plan{Hook: hooks.SyncShadow, RequestID: "r-shadow", Generation: 2, ResourceVersion: "48213", Children: []bus.Step{}, ShadowDiff: d}
	}
	for name, p := range map[string]*bus.Plan{
		"a rejected reply's":              rejected,
		"a shadow's":                      shadow(DiffOutcomes("r", wanting(map[string]any{"n": 1}, "a=1", "b=1"), wanting(map[string]any{"n": 2}, "a=2", "c=1"))),
		"a rejected shadow's":             shadow(DiffOutcomes("r", wanting(nil, "a=1"), Outcome{Rejected: rejected.Rejected})),
		"a shadow's like the sync hook's": shadow(DiffOutcomes("r", wanting(nil, "a=1"), wanting(nil, "a=1"))),
	} {
		if data := encode(p); validator.Validate(bus.PlanType, data) != nil {
			t.Errorf("%s plan: %v\ndata: %s", name, validator.Validate(bus.PlanType, data), data)
		}
	}
}
