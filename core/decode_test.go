package core

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"universalcontroller.dev/uc/schemas/hooks"
)

// sameAsDecodeReply checks DecodeData on a sync reply against
// hooks.DecodeReply, strict and loose: the same response, the same error.
// It tells whether the one-pass decoding took the reply.
func sameAsDecodeReply(t *testing.T, data []byte) (fast bool) {
	t.Helper()
	for _, strict := range []bool{false, true} {
		var want hooks.SyncResponse
		wantErr := hooks.DecodeReply(data, &want, strict)
		got, err := DecodeData[hooks.SyncResponse](hooks.Sync, data, strict)
		if wantErr != nil {
			if err == nil || !strings.HasSuffix(err.Error(), wantErr.Error()) {
				t.Fatalf("strict %v, %s: error %v, want hooks.DecodeReply's %v", strict, data, err, wantErr)
			}
			continue
		}
		// DeepEqual takes -0 for 0.
		if err != nil || !reflect.DeepEqual(*got, want) || math.Signbit(got.ResyncAfterSeconds) != math.Signbit(want.ResyncAfterSeconds) {
			t.Fatalf("strict %v, %s:\n got %#v (%v)\nwant %#v", strict, data, got, err, want)
		}
	}
	return decodeCommonSync(data, &hooks.SyncResponse{})
}

// TestCommonSyncAsDecodeReply holds the one-pass decoding of sync replies
// to hooks.DecodeReply on the replies recorded from hooks of several
// languages and on replies it must leave to it.
func TestCommonSyncAsDecodeReply(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "watcher", "testdata", "replies", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no recorded replies: %v", err)
	}
	taken := 0
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(name, ".golden.json") && sameAsDecodeReply(t, data) {
			taken++
		}
	}
	if taken < 3 {
		t.Errorf("the one-pass decoding took %d recorded replies, want the common ones (3 or more)", taken)
	}
	child := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{"n":"1"}}`
	for _, tc := range []struct {
		reply string
		fast  bool
	}{
		{fmt.Sprintf(`{"status":{"n":2,"f":0.5,"l":[]},"children":[%s,%s],"resyncAfterSeconds":3,"finalized":true}`, child, child), true},
		{`{"children":[],"resyncAfterSeconds":1.5}`, true},
		{`{"children":[],"resyncAfterSeconds":-0}`, false}, // to DecodeReply, which keeps its sign
		{`{"children":[],"resyncAfterSeconds":-0.0}`, true},
		{`{"children":[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","name":"b"}}]}`, false}, // a key twice
		{`{"children":[],"children":[]}`, false},
		{`{"Children":[]}`, false},                    // keys are case-sensitive: an unknown field
		{`{"children":[],"extra":1}`, false},          // an unknown field
		{`{"children":[{"apiVersion":"v1"}]}`, false}, // a child without a kind
		{`{"children":[{"apiVersion":"a/b/c","kind":"X"}]}`, false},
		{`{"children":[null]}`, false},
		{`{"children":null,"status":null}`, false},
		{`{"children":[],"finalized":"yes"}`, false},
		{`{"children":[],"resyncAfterSeconds":"1"}`, false},
		{`{"children":[],"events":[{"type":"Normal","reason":"R","message":"m"}]}`, false},
		{`{"children":[],"conditions":[{"type":"Ready","status":"True"}]}`, false},
		{`[]`, false}, {`null`, false}, {`{"children":[]`, false},
	} {
		if fast := sameAsDecodeReply(t, []byte(tc.reply)); fast != tc.fast {
			t.Errorf("%s: taken by the one-pass decoding %v, want %v", tc.reply, fast, tc.fast)
		}
	}
}

// FuzzCommonSync holds DecodeData to hooks.DecodeReply on any sync reply.
func FuzzCommonSync(f *testing.F) {
	f.Add([]byte(`{"status":{"n":2},"children":[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}],"resyncAfterSeconds":3}`))
	f.Add([]byte(`{"children":[{"kind":"X","a":1,"a":2}],"finalized":false}`))
	f.Fuzz(func(t *testing.T, data []byte) { sameAsDecodeReply(t, data) })
}
