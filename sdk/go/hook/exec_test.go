package hook

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
)

// TestServeOne: run as an exec hook, a worker answers the one request on
// its standard input with the handler of the hook it is told, and fails
// for a hook it does not serve or a call that fails.
func TestServeOne(t *testing.T) {
	sync := Sync(func(_ context.Context, req *SyncRequest) (*SyncResponse, error) {
		if req.Parent.GetName() == "broken" {
			return nil, errors.New("the hook broke")
		}
		return &SyncResponse{Status: map[string]any{"name": req.Parent.GetName()}}, nil
	})
	customize := Customize(func(context.Context, *CustomizeRequest) (*CustomizeResponse, error) {
		return &CustomizeResponse{}, nil
	})
	for _, tc := range []struct {
		hook, request, reply, err string
	}{
		{syncHook, `{"parent": {"apiVersion": "v1", "kind": "P", "metadata": {"name": "web"}}}`, `{"status":{"name":"web"},"children":null}`, ""},
		{customizeHook, `{"parent": {"apiVersion": "v1", "kind": "P"}}`, `{"relatedResources":null}`, ""},
		{finalizeHook, `{}`, "", "this worker serves no finalize hook"},
		{syncHook, `{"parent": {"apiVersion": "v1", "kind": "P", "metadata": {"name": "broken"}}}`, "", "the hook broke"},
		{syncHook, `not json`, "", "decode sync request"},
	} {
		var out bytes.Buffer
		err := serveOne(t.Context(), tc.hook, []Handler{sync, customize}, strings.NewReader(tc.request), &out)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s %s: err %v, want one saying %q", tc.hook, tc.request, err, tc.err)
			}
			continue
		}
		if err != nil || out.String() != tc.reply {
			t.Errorf("%s %s: reply %s (%v), want %s", tc.hook, tc.request, out.String(), err, tc.reply)
		}
	}
}
