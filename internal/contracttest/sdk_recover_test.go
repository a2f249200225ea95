package contracttest_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/sdk/go/hook"
)

// badStatus is a reply value whose encoding panics.
type badStatus struct{}

func (badStatus) MarshalJSON() ([]byte, error) { panic("cannot encode") }

// panickyHook panics for parent "panics", answers parent "bad-reply" with
// a reply whose encoding panics, and answers the others.
type panickyHook struct{}

func (panickyHook) Hook() string { return hooks.Sync }

func (panickyHook) Handle(_ context.Context, data []byte) (any, error) {
	var req struct {
		Parent struct {
			Metadata struct{ Name string } `json:"metadata"`
		} `json:"parent"`
	}
	if err := json.Unmarshal(data, &req); err != nil {
		return nil, err
	}
	switch name := req.Parent.Metadata.Name; name {
	case "panics":
		return name[len(name):][0], nil // index out of range
	case "bad-reply":
		return &hooks.SyncResponse{Status: map[string]any{"x": badStatus{}}}, nil
	}
	return &hooks.SyncResponse{}, nil
}

// TestServePanickingHook: a handler that panics, and one whose reply
// panics when encoded, are failed calls — retried, then dead-lettered with
// a failure event for the applier — every panic told to OnPanic; the
// worker stays up and serves the requests that follow.
func TestServePanickingHook(t *testing.T) {
	js := startJetStream(t, 30*time.Second)
	h := panickyHook{}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	served := make(chan error, 1)
	var panics atomic.Int32
	go func() { served <- hook.Serve(ctx, js, "c", h, hook.OnPanic(func() { panics.Add(1) })) }()

	for _, tc := range []struct{ name, message string }{
		{"panics", "panic: runtime error: index out of range [0] with length 0"},
		{"bad-reply", "cannot encode"},
	} {
		m := request(t, js, tc.name, fastDelivery)
		dl := last(t, js, bus.DeadLetterStream, m.DeadLetterSubject())
		if got := dl.Header.Get(hook.HeaderFailureReason); got != hook.ReasonWorkerError {
			t.Errorf("%s: dead letter reason %q, want %q", tc.name, got, hook.ReasonWorkerError)
		}
		e, _ := decode(t, last(t, js, bus.ReplyStream, m.ReplySubject()))
		var f bus.Failure
		if err := json.Unmarshal(e.Data(), &f); err != nil {
			t.Fatal(err)
		}
		if e.Type() != bus.FailureType(hooks.Sync) || f.Deliveries != 3 || !strings.Contains(f.Message, tc.message) {
			t.Errorf("%s: failure event %s %+v, want %q after 3 deliveries", tc.name, e.Type(), f, tc.message)
		}
		if strings.Contains(f.Message, "goroutine") {
			t.Errorf("%s: the failure reported on the parent carries the stack: %q", tc.name, f.Message)
		}
	}
	if got := panics.Load(); got != 6 {
		t.Errorf("counted %v panics, want 6 (3 deliveries each)", got)
	}

	ok := request(t, js, "ok", fastDelivery)
	if e, _ := decode(t, last(t, js, bus.ReplyStream, ok.ReplySubject())); e.Type() != bus.ResponseType(hooks.Sync) {
		t.Errorf("ok: got a %s after the panics, want its reply", e.Type())
	}
	select {
	case err := <-served:
		t.Fatalf("Serve returned %v", err)
	default:
	}
}
