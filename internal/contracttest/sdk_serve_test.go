package contracttest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"universalcontroller.dev/uc/internal/bustest"
	"universalcontroller.dev/uc/internal/topology"
	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/sdk/go/hook"
)

// startJetStream runs an embedded JetStream server with uc's streams and the
// sync hook consumer of controller c, with the given ack wait.
func startJetStream(t *testing.T, ackWait time.Duration) jetstream.JetStream {
	t.Helper()
	js := bustest.JetStream(t)
	c := topology.HookConsumer("c", hooks.Sync)
	c.Config.AckWait = ackWait
	if _, err := js.CreateOrUpdateConsumer(t.Context(), c.Stream, c.Config); err != nil {
		t.Fatal(err)
	}
	return js
}

// fastDelivery gives up after 3 tries of 300ms, 200ms and 400ms apart.
const fastDelivery = `{"timeout":"300ms","maxDeliveries":3,"backoffDelay":"200ms","maxBackoffDelay":"1s"}`

// request publishes a sync request for parent name of controller c, whose
// sync hook has the delivery spec delivery.
func request(t *testing.T, js jetstream.JetStream, name, delivery string, edits ...func(*bus.Meta)) bus.Meta {
	t.Helper()
	return requestIn(t.Context(), t, js, name, delivery, edits...)
}

// requestIn is request sent in the span of ctx.
func requestIn(ctx context.Context, t *testing.T, js jetstream.JetStream, name, delivery string, edits ...func(*bus.Meta)) bus.Meta {
	t.Helper()
	uid := types.UID(uuid.NewString())
	meta := bus.Meta{Address: bus.Address{Controller: "c", Hook: hooks.Sync, Partition: bus.Partition(uid, 4), ParentUID: uid},
		Namespace: "ns", Name: name, Generation: 1, ResourceVersion: "7", Observation: 7}
	for _, edit := range edits {
		edit(&meta)
	}
	e := event.New()
	e.SetID(uuid.NewString())
	e.SetType(bus.RequestType(hooks.Sync))
	e.SetSource("/test")
	e.SetTime(time.Now())
	meta.SetOn(&e)
	bus.InjectTrace(ctx, &e)
	body := `{"controller":{"spec":{"hooks":{"sync":{"delivery":` + delivery + `}}}},"parent":{"metadata":{"name":"` + name + `"}}}`
	if err := e.SetData(event.ApplicationJSON, json.RawMessage(body)); err != nil {
		t.Fatal(err)
	}
	msg, err := bus.ToMsg(t.Context(), meta.RequestSubject(), &e)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.PublishMsg(t.Context(), msg); err != nil {
		t.Fatal(err)
	}
	return meta
}

// steeredHook fails, hangs or answers as each parent's name says, and
// records when it was called.
type steeredHook struct {
	mu    sync.Mutex
	calls map[string][]time.Time
}

func (h *steeredHook) Hook() string { return hooks.Sync }

func (h *steeredHook) Handle(ctx context.Context, data []byte) (any, error) {
	var req struct {
		Parent struct {
			Metadata struct{ Name string } `json:"metadata"`
		} `json:"parent"`
	}
	if err := json.Unmarshal(data, &req); err != nil {
		return nil, err
	}
	name := req.Parent.Metadata.Name
	h.mu.Lock()
	h.calls[name] = append(h.calls[name], time.Now())
	n := len(h.calls[name])
	h.mu.Unlock()
	switch {
	case name == "hangs":
		<-make(chan struct{}) // never returns: Serve leaves it behind
	case name == "busy" && n == 1:
		return nil, &hook.Error{Reason: hook.ReasonHTTPError, RetryAfter: time.Second, Err: errors.New("429 Too Many Requests")}
	case strings.HasPrefix(name, "long"):
		select {
		case <-time.After(2500 * time.Millisecond): // the hook's work
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	case name == "broken":
		return nil, &hook.Error{Reason: hook.ReasonHTTPError, Err: errors.New("500 Internal Server Error")}
	}
	return &hooks.SyncResponse{Status: map[string]any{"calls": n}}, nil
}

func (h *steeredHook) callTimes(name string) []time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]time.Time(nil), h.calls[name]...)
}

// last waits for a message on subject of stream and returns the last one.
func last(t *testing.T, js jetstream.JetStream, stream, subject string) *jetstream.RawStreamMsg {
	t.Helper()
	s, err := js.Stream(t.Context(), stream)
	if err != nil {
		t.Fatal(err)
	}
	var msg *jetstream.RawStreamMsg
	err = wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		msg, err = s.GetLastMsgForSubject(ctx, subject)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		t.Fatalf("nothing on %s: %v", subject, err)
	}
	return msg
}

func decode(t *testing.T, msg *jetstream.RawStreamMsg) (*event.Event, bus.Meta) {
	t.Helper()
	e, err := bus.FromMsg(t.Context(), msg.Subject, msg.Header, msg.Data)
	if err != nil {
		t.Fatal(err)
	}
	m, err := bus.MetaOf(e)
	if err != nil {
		t.Fatal(err)
	}
	return e, m
}

// TestServeDeliveryPromises: a failing request is tried the controller's
// maxDeliveries times with a growing backoff, then dead-lettered, and a
// failure event naming the reason goes to the applier; a 429's Retry-After
// is waited for; a hung call times out without holding up other parents.
func TestServeDeliveryPromises(t *testing.T) {
	js := startJetStream(t, 30*time.Second)
	h := &steeredHook{calls: map[string][]time.Time{}}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() { _ = hook.Serve(ctx, js, "c", h, hook.WithConcurrency(2)) }()

	broken, hangs, busy := request(t, js, "broken", fastDelivery), request(t, js, "hangs", fastDelivery), request(t, js, "busy", fastDelivery)
	ok := request(t, js, "ok", fastDelivery)

	// Other parents are served while "hangs" holds a slot.
	if _, m := decode(t, last(t, js, bus.ReplyStream, ok.ReplySubject())); m.Name != "ok" {
		t.Fatalf("reply for %s on ok's subject", m.Name)
	}

	// 429: the second call waits for Retry-After (1s), not the 200ms backoff.
	if e, _ := decode(t, last(t, js, bus.ReplyStream, busy.ReplySubject())); e.Type() != bus.ResponseType(hooks.Sync) {
		t.Fatalf("busy: got a %s", e.Type())
	}
	if calls := h.callTimes("busy"); len(calls) != 2 || calls[1].Sub(calls[0]) < time.Second {
		t.Errorf("busy: calls at %v, want 2 calls 1s apart", calls)
	} else {
		t.Logf("429 Retry-After 1s: second call after %s", calls[1].Sub(calls[0]).Round(time.Millisecond))
	}

	for _, tc := range []struct {
		meta   bus.Meta
		reason string
	}{{broken, hook.ReasonHTTPError}, {hangs, hook.ReasonTimeout}} {
		dl := last(t, js, bus.DeadLetterStream, tc.meta.DeadLetterSubject())
		if got := dl.Header.Get(hook.HeaderFailureReason); got != tc.reason {
			t.Errorf("%s: dead letter reason %q, want %q", tc.meta.Name, got, tc.reason)
		}
		// The failure event follows the dead letter: until it comes, the
		// reply subject's last event is the report of the first failure.
		var e *event.Event
		var m bus.Meta
		var f bus.Failure
		err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			e, m = decode(t, last(t, js, bus.ReplyStream, tc.meta.ReplySubject()))
			f = bus.Failure{}
			if err := json.Unmarshal(e.Data(), &f); err != nil {
				return false, err
			}
			return !f.Retrying, nil
		})
		if err != nil {
			t.Fatalf("%s: no failure event after the dead letter: %v (last: %+v)", tc.meta.Name, err, f)
		}
		if e.Type() != bus.FailureType(hooks.Sync) || f.Reason != tc.reason || f.Deliveries != 3 {
			t.Errorf("%s: failure event %s %+v, want %s after 3 deliveries", tc.meta.Name, e.Type(), f, tc.reason)
		}
		if m.Observation != tc.meta.Observation || m.ParentUID != tc.meta.ParentUID || m.RequestID == "" {
			t.Errorf("%s: failure event meta %+v does not answer the request %+v", tc.meta.Name, m, tc.meta)
		}
		t.Logf("%s: %s: %s", tc.meta.Name, f.Reason, f.Message)
	}
	calls := h.callTimes("broken")
	if len(calls) != 3 {
		t.Fatalf("broken: %d calls, want 3", len(calls))
	}
	// Backoff 200ms then 400ms, each less up to half its jitter.
	for i, min := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond} {
		if gap := calls[i+1].Sub(calls[i]); gap < min {
			t.Errorf("broken: retry %d after %s, want at least %s", i+1, gap, min)
		} else {
			t.Logf("broken: retry %d after %s", i+1, gap.Round(time.Millisecond))
		}
	}
}

// TestServeRetryOnce: a request that is a retry of a parent whose requests
// failed before (bus.Meta.Failures) is tried once, whatever the delivery
// policy: it is dead-lettered at its first failure, and the failure
// reported is final.
func TestServeRetryOnce(t *testing.T) {
	js := startJetStream(t, 30*time.Second)
	h := &steeredHook{calls: map[string][]time.Time{}}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() { _ = hook.Serve(ctx, js, "c", h) }()
	retry := request(t, js, "broken", fastDelivery, func(m *bus.Meta) { m.Failures = 3 })
	if got := last(t, js, bus.DeadLetterStream, retry.DeadLetterSubject()).Header.Get(hook.HeaderFailureReason); got != hook.ReasonHTTPError {
		t.Errorf("dead letter reason %q, want %q", got, hook.ReasonHTTPError)
	}
	e, m := decode(t, last(t, js, bus.ReplyStream, retry.ReplySubject()))
	var f bus.Failure
	if err := json.Unmarshal(e.Data(), &f); err != nil {
		t.Fatal(err)
	}
	if f.Deliveries != 1 || f.Retrying || m.Failures != 3 {
		t.Errorf("failure %+v (failures %d), want one delivery, not retrying, failures 3", f, m.Failures)
	}
	if calls := h.callTimes("broken"); len(calls) != 1 {
		t.Errorf("%d calls, want 1", len(calls))
	}
}

// TestServeLongCalls: two workers share a hook; a call that takes longer
// than the consumer's ack wait is not delivered again, to either of them,
// while it is in progress, and neither is a request waiting for a free
// slot: twice as many long calls as the workers have slots are each made
// once.
func TestServeLongCalls(t *testing.T) {
	js := startJetStream(t, time.Second)
	h := &steeredHook{calls: map[string][]time.Time{}}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	for range 2 {
		go func() { _ = hook.Serve(ctx, js, "c", h, hook.WithConcurrency(2)) }()
	}
	var longs []bus.Meta
	for i := range 8 {
		longs = append(longs, request(t, js, fmt.Sprintf("long-%d", i), `{"timeout":"10s"}`))
	}
	for _, long := range longs {
		if _, m := decode(t, last(t, js, bus.ReplyStream, long.ReplySubject())); m.Name != long.Name {
			t.Fatalf("reply for %s on the subject of %s", m.Name, long.Name)
		}
	}
	for _, long := range longs {
		if n := len(h.callTimes(long.Name)); n != 1 {
			t.Errorf("%s: a 2.5s call with a 1s ack wait was made %d times", long.Name, n)
		}
	}
}

// TestServeAfterConsumerLoss: the worker goes on serving when its consumer
// is lost with a NATS restart, or deleted, and uc creates it again.
func TestServeAfterConsumerLoss(t *testing.T) {
	for _, tc := range []struct {
		name string
		lose func(*bustest.Server, jetstream.JetStream)
	}{
		{"NATS restarted", func(s *bustest.Server, _ jetstream.JetStream) { s.Restart() }},
		{"consumer deleted", func(_ *bustest.Server, js jetstream.JetStream) {
			if err := js.DeleteConsumer(t.Context(), bus.RequestStream, bus.HookConsumer("c", hooks.Sync)); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, js := bustest.RestartableJetStream(t)
			createConsumer := func() {
				err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
					_, err := topology.EnsureConsumer(ctx, js, topology.HookConsumer("c", hooks.Sync))
					return err == nil, nil
				})
				if err != nil {
					t.Fatal(err)
				}
			}
			createConsumer()
			h := &steeredHook{calls: map[string][]time.Time{}}
			served := make(chan error, 1)
			go func() { served <- hook.Serve(t.Context(), js, "c", h) }()
			before := request(t, js, "before", fastDelivery)
			decode(t, last(t, js, bus.ReplyStream, before.ReplySubject()))

			tc.lose(s, js)
			_, err := js.Consumer(t.Context(), bus.RequestStream, bus.HookConsumer("c", hooks.Sync))
			if !errors.Is(err, jetstream.ErrConsumerNotFound) {
				t.Fatalf("the consumer is still there (%v): nothing to test", err)
			}
			createConsumer() // as the dispatcher does
			after := request(t, js, "after", fastDelivery)
			if _, m := decode(t, last(t, js, bus.ReplyStream, after.ReplySubject())); m.Name != "after" {
				t.Fatalf("reply for %s on after's subject", m.Name)
			}
			select {
			case err := <-served:
				t.Fatalf("Serve returned %v", err)
			default:
			}
		})
	}
}
