package hooks

import (
	"strings"
	"testing"
)

// TestDecodeReply: strict, an unknown field, or a field given twice (but
// inside a child, which decodes itself as Metacontroller's does), is an
// error naming it; loose, the reply is read
// without them. Malformed JSON is an error either way.
func TestDecodeReply(t *testing.T) {
	for _, tc := range []struct {
		name, reply string
		strictErr   string // "" when strict decoding accepts it
		looseErr    bool
	}{
		{"valid", `{"status":{"a":1},"children":[]}`, "", false},
		{"unknown field", `{"status":{},"childrens":[]}`, `unknown field "childrens"`, false},
		{"wrong case", `{"Status":{}}`, `unknown field "Status"`, false},
		{"duplicate field", `{"resyncAfterSeconds":1,"resyncAfterSeconds":2}`, `duplicate field "resyncAfterSeconds"`, false},
		{"duplicate in the status", `{"status":{"a":1,"a":2}}`, `duplicate field "status.a"`, false},
		{"malformed", `{"status":`, "unexpected end of JSON input", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var strict, loose SyncResponse
			err := DecodeReply([]byte(tc.reply), &strict, true)
			if (err == nil) != (tc.strictErr == "") || (err != nil && !strings.Contains(err.Error(), tc.strictErr)) {
				t.Errorf("strict: %v, want an error naming %q", err, tc.strictErr)
			}
			if err := DecodeReply([]byte(tc.reply), &loose, false); (err != nil) != tc.looseErr {
				t.Errorf("loose: %v, want an error: %v", err, tc.looseErr)
			}
		})
	}
}
