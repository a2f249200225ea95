package watcher

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/client-go/util/workqueue"

	"universalcontroller.dev/uc/internal/recovery"
	"universalcontroller.dev/uc/internal/tracing"
	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
)

// brokenWatcher is a watcher without a registry: its sync and its handling
// of a customize reply panic (a nil pointer), as a bug would make them.
func brokenWatcher(logs *bytes.Buffer) *Watcher {
	return &Watcher{
		log:    slog.New(slog.NewTextHandler(logs, nil)),
		tracer: tracing.Tracer(nil),
		queue: workqueue.NewTypedRateLimitingQueue(
			workqueue.NewTypedItemExponentialFailureRateLimiter[parentKey](time.Millisecond, 10*time.Millisecond)),
	}
}

func panics() float64 { return testutil.ToFloat64(recovery.Panics.WithLabelValues(recovery.Watcher)) }

// TestSyncPanicIsRetried: a sync that panics does not stop the worker loop;
// the parent is retried with backoff, every panic is counted and logged
// with the parent and the stack, and other parents are still synced.
func TestSyncPanicIsRetried(t *testing.T) {
	var logs bytes.Buffer
	w := brokenWatcher(&logs)
	defer w.queue.ShutDown()
	before := panics()
	p := parentKey{Controller: "c", Namespace: "ns", Name: "p"}
	w.queue.Add(p)
	w.queue.Add(parentKey{Controller: "c", Namespace: "ns", Name: "q"})
	for range 4 {
		if !w.worker().Next(t.Context(), w.queue) {
			t.Fatal("the worker loop stopped")
		}
	}
	if got := panics() - before; got != 4 {
		t.Errorf("counted %v panics, want 4", got)
	}
	if n := w.queue.NumRequeues(p); n < 1 {
		t.Errorf("parent p was requeued %d times, want at least 1 (with backoff)", n)
	}
	for _, want := range []string{"recovered from a panic", "parent=ns/p", "parent=ns/q", "stack=", "watcher.(*Watcher).sync", `msg="sync parent"`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the log does not say %q:\n%s", want, logs.String())
		}
	}
}

// replyMsg is a customize reply as the bus delivers it.
type replyMsg struct {
	jetstream.Msg
	nats *nats.Msg
}

func (m replyMsg) Subject() string      { return m.nats.Subject }
func (m replyMsg) Headers() nats.Header { return m.nats.Header }
func (m replyMsg) Data() []byte         { return m.nats.Data }

// customizeReply is a customize reply of meta's parent, relating nothing,
// as the bus delivers it.
func customizeReply(t *testing.T, meta bus.Meta) replyMsg {
	t.Helper()
	e := event.New()
	e.SetID("r1")
	e.SetType(bus.ResponseType(hooks.Customize))
	e.SetSource("/test")
	meta.SetOn(&e)
	if err := e.SetData(event.ApplicationJSON, json.RawMessage(`{"relatedResources":[]}`)); err != nil {
		t.Fatal(err)
	}
	msg, err := bus.ToMsg(t.Context(), meta.ReplySubject(), &e)
	if err != nil {
		t.Fatal(err)
	}
	return replyMsg{nats: msg}
}

// TestCustomizeReplyPanicIsAnError: a customize reply whose handling
// panics fails (and is retried by the consumer) instead of ending the
// process, and the panic is counted.
func TestCustomizeReplyPanicIsAnError(t *testing.T) {
	var logs bytes.Buffer
	w := brokenWatcher(&logs)
	defer w.queue.ShutDown()
	meta := bus.Meta{Address: bus.Address{Controller: "c", Hook: hooks.Customize, Partition: 1, ParentUID: "uid-p"},
		Namespace: "ns", Name: "p", Generation: 1, Observation: 1}
	before := panics()
	err := w.customizeReplyWithin(t.Context(), customizeReply(t, meta))
	if err == nil || !strings.Contains(err.Error(), "panic") {
		t.Fatalf("err = %v, want the panic", err)
	}
	if got := panics() - before; got != 1 {
		t.Errorf("counted %v panics, want 1", got)
	}
	if !strings.Contains(logs.String(), "subject="+meta.ReplySubject()) {
		t.Errorf("the log does not name the reply:\n%s", logs.String())
	}
}
