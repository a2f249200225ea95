package inspect

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"universalcontroller.dev/uc/internal/bustest"
	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/schemas/v1alpha1"
	"universalcontroller.dev/uc/sdk/go/hook"
)

const testController = "shop.example.com"

// metaOf is a sync request's meta for the parent ns/name of uid, observed
// at observation.
func metaOf(uid types.UID, name string, observation int64) bus.Meta {
	return bus.Meta{Address: bus.Address{Controller: testController, Hook: hooks.Sync, Partition: bus.Partition(uid, bus.DefaultPartitions), ParentUID: uid},
		Namespace: "ns", Name: name, Generation: observation / 10, ResourceVersion: fmt.Sprint(observation), Observation: observation}
}

// requestMsg is the request of meta with that id, as the watcher publishes
// it.
func requestMsg(t *testing.T, meta bus.Meta, id string) *nats.Msg {
	t.Helper()
	e := event.New()
	e.SetID(id)
	e.SetType(bus.RequestType(meta.Hook))
	e.SetSource("/universalcontroller/" + meta.Controller)
	e.SetTime(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	meta.SetOn(&e)
	if err := e.SetData(event.ApplicationJSON, map[string]any{"parent": map[string]any{"metadata": map[string]any{"name": meta.Name}}}); err != nil {
		t.Fatal(err)
	}
	msg, err := bus.ToMsg(t.Context(), meta.RequestSubject(), &e)
	if err != nil {
		t.Fatal(err)
	}
	return msg
}

// parentWithUID is a parent of that UID.
func parentWithUID(uid types.UID) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetUID(uid)
	return u
}

// deadLetter dead-letters the request of meta as a worker does, and
// returns its id.
func deadLetter(t *testing.T, js jetstream.JetStream, meta bus.Meta, id string) uint64 {
	t.Helper()
	req := requestMsg(t, meta, id)
	req.Header.Set(jetstream.MsgIDHeader, id)
	req.Header.Set(hook.HeaderFailureReason, "WorkerError")
	req.Header.Set(hook.HeaderFailureMessage, "the hook is broken")
	req.Subject = meta.DeadLetterSubject()
	ack, err := js.PublishMsg(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	return ack.Sequence
}

// setFence records that the reply of that observation was applied.
func setFence(t *testing.T, js jetstream.JetStream, uid types.UID, observation int64) {
	t.Helper()
	kv, err := js.CreateOrUpdateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: bus.FenceBucket, Storage: jetstream.MemoryStorage})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(t.Context(), string(uid), bus.Fence{Observation: observation, Request: "applied", Generation: observation / 10, ResourceVersion: "1"}.Value()); err != nil {
		t.Fatal(err)
	}
}

// TestReplay: dead letters are listed with whether a later observation was
// applied since; replaying a controller's publishes, per parent, the
// latest one that was not, with a new id and the same observation, and
// deletes it; a dead letter is never replayed over a request waiting for
// its parent; a superseded one replayed by its id says so.
func TestReplay(t *testing.T) {
	ctx := t.Context()
	js := bustest.JetStream(t)
	b := NewBus(js)
	const p, q types.UID = "0b5c-p", "0b5c-q"
	older := deadLetter(t, js, metaOf(p, "p", 10), "req-p-10")
	latest := deadLetter(t, js, metaOf(p, "p", 20), "req-p-20")
	applied := deadLetter(t, js, metaOf(q, "q", 30), "req-q-30")
	setFence(t, js, q, 40)
	deadLetter(t, js, bus.Meta{Address: bus.Address{Controller: "other", Hook: hooks.Sync, ParentUID: "x"}, Name: "x"}, "req-other")

	list, err := b.DeadLetters(ctx, testController)
	if err != nil {
		t.Fatal(err)
	}
	if got := deadLetterStates(list); got != "1:p:dead 2:p:dead 3:q:superseded" {
		t.Fatalf("dead letters %s", got)
	}
	if d := list[0]; d.Reason != "WorkerError" || d.Message != "the hook is broken" || d.Request.ID != "req-p-10" || d.Request.Observation != 10 {
		t.Fatalf("dead letter %+v, request %+v", d, d.Request)
	}

	replayed, err := b.ReplayController(ctx, testController)
	if err != nil {
		t.Fatal(err)
	}
	if len(replayed) != 3 || replayed[0].Skipped != skippedOlder || replayed[1].Request == "" || replayed[2].Skipped != skippedSuperseded {
		t.Fatalf("replayed %+v", replayed)
	}
	req, err := b.last(ctx, bus.RequestStream, metaOf(p, "p", 0).RequestSubject())
	if err != nil || req == nil {
		t.Fatalf("no request for p after the replay (err %v)", err)
	}
	if !strings.HasPrefix(req.ID, "req-p-20"+replaySuffix) || req.ID != replayed[1].Request || req.Observation != 20 || req.Generation != 2 {
		t.Fatalf("the replayed request is %+v, want req-p-20's observation under a new id", req)
	}
	if _, err := b.DeadLetter(ctx, latest); !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Fatalf("the replayed dead letter is still there (err %v)", err)
	}

	// p's replayed request waits: the older dead letter is not published
	// over it.
	r, err := b.Replay(ctx, older)
	if err != nil || r.Skipped != skippedWaiting {
		t.Fatalf("replay of a dead letter over a waiting request: %+v, %v", r, err)
	}
	if again, _ := b.last(ctx, bus.RequestStream, metaOf(p, "p", 0).RequestSubject()); again.Sequence != req.Sequence {
		t.Fatalf("the waiting request was replaced by %+v", again)
	}

	r, err = b.Replay(ctx, applied)
	if err != nil || r.Request == "" || r.Note != noteSuperseded {
		t.Fatalf("replay of a superseded dead letter: %+v, %v", r, err)
	}
	// A second replay of it gets an id of its own, with one replay mark.
	if id := replayID(r.Request); strings.Count(id, replaySuffix) != 1 || id == r.Request {
		t.Fatalf("a replayed request's replay id %q", id)
	}
}

// deadLetterStates is "id:parent:dead|superseded" for each dead letter.
func deadLetterStates(list []*DeadLetter) string {
	var s []string
	for _, d := range list {
		state := "dead"
		if d.Superseded {
			state = "superseded"
		}
		s = append(s, fmt.Sprintf("%d:%s:%s", d.ID, d.Request.Name, state))
	}
	return strings.Join(s, " ")
}

// TestSelectReplays: per subject, the dead letter of the latest
// observation is replayed (the later one of two of the same observation),
// unless superseded; one that is no uc request is skipped, saying why.
func TestSelectReplays(t *testing.T) {
	dl := func(id uint64, subject string, observation int64, superseded bool) *DeadLetter {
		return &DeadLetter{ID: id, Superseded: superseded, Request: &Message{Subject: subject, Observation: observation, Name: subject}}
	}
	for _, tc := range []struct {
		name string
		all  []*DeadLetter
		want string // replayed ids, then each skipped id:why
	}{
		{"none", nil, ""},
		{"one", []*DeadLetter{dl(1, "a", 10, false)}, "1"},
		{"latest observation wins, not the latest id", []*DeadLetter{dl(1, "a", 20, false), dl(2, "a", 10, false)}, "1 2:" + skippedOlder},
		{"same observation: the later dead letter", []*DeadLetter{dl(1, "a", 10, false), dl(2, "a", 10, false)}, "2 1:" + skippedOlder},
		{"superseded", []*DeadLetter{dl(1, "a", 10, true), dl(2, "b", 10, false)}, "2 1:" + skippedSuperseded},
		{"each subject", []*DeadLetter{dl(1, "a", 10, false), dl(2, "b", 10, false)}, "1 2"},
		{"not a request", []*DeadLetter{{ID: 3, Problem: "garbage"}}, "3:garbage"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			replay, skipped := selectReplays(tc.all)
			var got []string
			for _, d := range replay {
				got = append(got, fmt.Sprint(d.ID))
			}
			for _, s := range skipped {
				got = append(got, fmt.Sprintf("%d:%s", s.ID, s.Skipped))
			}
			if strings.Join(got, " ") != tc.want {
				t.Errorf("got %q, want %q", strings.Join(got, " "), tc.want)
			}
		})
	}
}

// TestBusReads: the parent's waiting request, its consumer's state — not
// delivered, then delivered and unacknowledged — the fence and the
// partition's holder, all read without taking anything from the streams.
func TestBusReads(t *testing.T) {
	ctx := t.Context()
	js := bustest.JetStream(t)
	b := NewBus(js)
	const uid types.UID = "0b5c-p"
	meta := metaOf(uid, "p", 50)
	hook, err := b.hook(ctx, testController, hooks.Sync, &v1alpha1.Hook{}, parentWithUID(uid))
	if err != nil || hook.Consumer != nil || hook.Request != nil || hook.Reply != nil {
		t.Fatalf("an empty bus: %+v, %v", hook, err)
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, bus.RequestStream, jetstream.ConsumerConfig{Durable: bus.HookConsumer(testController, hooks.Sync),
		FilterSubject: bus.HookRequests(testController, hooks.Sync), AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.PublishMsg(ctx, requestMsg(t, meta, "req-50")); err != nil {
		t.Fatal(err)
	}
	// The consumer counts the request as pending a moment after the
	// stream stored it: read until it does, or the deadline.
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for deadline := time.Now().Add(5 * time.Second); ; <-tick.C {
		hook, err = b.hook(ctx, testController, hooks.Sync, &v1alpha1.Hook{}, parentWithUID(uid))
		if err == nil && hook.Consumer != nil && hook.Consumer.Pending == 1 || time.Now().After(deadline) {
			break
		}
	}
	if err != nil || hook.Request == nil || hook.Request.ID != "req-50" || hook.Delivered || hook.Consumer.Pending != 1 {
		t.Fatalf("a request not delivered yet: %+v (request %+v, consumer %+v), %v", hook, hook.Request, hook.Consumer, err)
	}
	batch, err := cons.FetchNoWait(1)
	if err != nil {
		t.Fatal(err)
	}
	for range batch.Messages() {
	}
	hook, err = b.hook(ctx, testController, hooks.Sync, &v1alpha1.Hook{}, parentWithUID(uid))
	if err != nil || !hook.Delivered || hook.Consumer.AckPending != 1 || hook.Consumer.LastDelivery == nil {
		t.Fatalf("a request delivered: %+v (consumer %+v), %v", hook, hook.Consumer, err)
	}

	if f, err := b.fence(ctx, uid); f != nil || err != nil {
		t.Fatalf("fence before any apply: %+v, %v", f, err)
	}
	setFence(t, js, uid, 40)
	if f, err := b.fence(ctx, uid); err != nil || f.Observation != 40 || f.Generation != 4 || f.Applied.IsZero() {
		t.Fatalf("fence %+v, %v", f, err)
	}
	if last, err := b.lastPublished(ctx, testController, parentWithUID(uid), false); !errors.Is(err, errNoWatcher) {
		t.Fatalf("a question with no watcher: %+v, %v", last, err)
	}
	if h, err := b.holder(ctx, 3); h != "" || err != nil {
		t.Fatalf("holder before any applier: %q, %v", h, err)
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: bus.PartitionsBucket, Storage: jetstream.MemoryStorage})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, bus.PartitionKey(3), []byte("applier-0")); err != nil {
		t.Fatal(err)
	}
	if h, err := b.holder(ctx, 3); h != "applier-0" || err != nil {
		t.Fatalf("holder %q, %v", h, err)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if info, err := cons.Info(ctx); err != nil || info.NumAckPending != 1 {
		t.Fatalf("reading changed the consumer: %+v, %v", info, err)
	}
}
