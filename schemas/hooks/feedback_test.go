package hooks

import (
	"strings"
	"testing"
)

// TestValidateFeedback: a reply's events and conditions decode in either
// hook version's mode, and Validate rejects, naming the field, an event of
// another type than Normal or Warning, with no reason, or too long, a
// condition Kubernetes would refuse, or one of uc's own, and more of
// either than a reply may carry.
func TestValidateFeedback(t *testing.T) {
	many := func(item string, n int) string {
		return "[" + strings.TrimSuffix(strings.Repeat(item+",", n), ",") + "]"
	}
	event := `{"type":"Warning","reason":"LowDisk","message":"the volume is 95% full"}`
	for _, tc := range []struct {
		name, reply string
		want        string // "" when valid
	}{
		{"events and conditions", `{"children":[],"events":[` + event + `,{"type":"Normal","reason":"Scaled"}],` +
			`"conditions":[{"type":"Ready","status":"True","reason":"AllUp","message":"3/3"},{"type":"example.com/Degraded","status":"Unknown","reason":"Probing"}]}`, ""},
		{"neither", `{"children":[],"events":[],"conditions":null}`, ""},
		{"event type", `{"children":[],"events":[{"type":"Info","reason":"Hello"}]}`,
			`events[0].type: Unsupported value: "Info": supported values: "Normal", "Warning"`},
		{"empty event reason", `{"children":[],"events":[{"type":"Normal","reason":"","message":"x"}]}`, "events[0].reason: Required value"},
		{"event reason too long", `{"children":[],"events":[{"type":"Normal","reason":"` + strings.Repeat("R", MaxEventReason+1) + `"}]}`,
			"events[0].reason: Too long: may not be more than 128 bytes"},
		{"event message too long", `{"children":[],"events":[` + event + `,{"type":"Normal","reason":"Big","message":"` + strings.Repeat("m", MaxEventMessage+1) + `"}]}`,
			"events[1].message: Too long: may not be more than 1024 bytes"},
		{"too many events", `{"children":[],"events":` + many(event, MaxEvents+1) + `}`, "events: Too many: 17: must have at most 16 items"},
		{"condition status", `{"children":[],"conditions":[{"type":"Ready","status":"Yes","reason":"Up"}]}`,
			`conditions[0].status: Unsupported value: "Yes"`},
		{"condition without reason", `{"children":[],"conditions":[{"type":"Ready","status":"True"}]}`, "conditions[0].reason: Required value"},
		{"condition reason not CamelCase", `{"children":[],"conditions":[{"type":"Ready","status":"True","reason":"all up"}]}`,
			`conditions[0].reason: Invalid value: "all up"`},
		{"condition type", `{"children":[],"conditions":[{"type":"not a type","status":"True","reason":"Up"}]}`,
			`conditions[0].type: Invalid value: "not a type"`},
		{"condition message too long", `{"children":[],"conditions":[{"type":"Ready","status":"True","reason":"Up","message":"` + strings.Repeat("m", 32*1024+1) + `"}]}`,
			"conditions[0].message: Too long"},
		{"a type twice", `{"children":[],"conditions":[{"type":"Ready","status":"True","reason":"Up"},{"type":"Ready","status":"False","reason":"Down"}]}`,
			`conditions[1].type: Duplicate value: "Ready"`},
		{"uc's Synced", `{"children":[],"conditions":[{"type":"Synced","status":"True","reason":"Mine"}]}`,
			"conditions[0].type: Forbidden: Synced is uc's own condition: a hook may not set it"},
		{"uc's Updated", `{"children":[],"conditions":[{"type":"Ready","status":"True","reason":"Up"},{"type":"Updated","status":"True","reason":"Mine"}]}`,
			"conditions[1].type: Forbidden: Updated is uc's own condition"},
		{"too many conditions", `{"children":[],"conditions":` + many(`{"type":"Ready","status":"True","reason":"Up"}`, MaxConditions+1) + `}`,
			"conditions: Too many: 17: must have at most 16 items"},
		{"every problem named", `{"children":[],"events":[{"type":"Info","reason":""}],"conditions":[{"type":"Synced","status":"True","reason":"X"}]}`,
			`[events[0].type: Unsupported value: "Info": supported values: "Normal", "Warning", events[0].reason: Required value, ` +
				`conditions[0].type: Forbidden: Synced is uc's own condition: a hook may not set it]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, strict := range []bool{true, false} {
				var resp SyncResponse
				if err := DecodeReply([]byte(tc.reply), &resp, strict); err != nil {
					t.Fatalf("decode (strict %t): %v", strict, err)
				}
				err := resp.Validate()
				if (err == nil) != (tc.want == "") || err != nil && !strings.Contains(err.Error(), tc.want) {
					t.Errorf("strict %t: Validate() = %v, want an error naming %q", strict, err, tc.want)
				}
			}
		})
	}
}

// TestDecodeFeedbackShape: an events or conditions field of the wrong
// shape, or a condition with a field uc sets itself, is not a valid reply
// (strict: an unknown field).
func TestDecodeFeedbackShape(t *testing.T) {
	for _, tc := range []struct {
		name, reply string
		strictOnly  bool
	}{
		{"events an object", `{"children":[],"events":{"type":"Normal"}}`, false},
		{"condition status a boolean", `{"children":[],"conditions":[{"type":"Ready","status":true,"reason":"Up"}]}`, false},
		{"lastTransitionTime from the hook", `{"children":[],"conditions":[{"type":"Ready","status":"True","reason":"Up","lastTransitionTime":"2026-01-01T00:00:00Z"}]}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var strict, loose SyncResponse
			if err := DecodeReply([]byte(tc.reply), &strict, true); err == nil {
				t.Error("strict: decoded, want an error")
			}
			if err := DecodeReply([]byte(tc.reply), &loose, false); (err == nil) != tc.strictOnly {
				t.Errorf("loose: %v, want an error: %t", err, !tc.strictOnly)
			}
		})
	}
}
