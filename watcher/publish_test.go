package watcher

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"universalcontroller.dev/uc/core"
	"universalcontroller.dev/uc/internal/bustest"
	"universalcontroller.dev/uc/internal/tracing"
	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
)

func TestEventID(t *testing.T) {
	same := eventID("uc.req.c.sync.1.u", "t", []byte(`{"parent":{"metadata":{"resourceVersion":"7"}}}`), false)
	tests := []struct {
		name   string
		id     string
		isSame bool
	}{
		{"the same observation", eventID("uc.req.c.sync.1.u", "t", []byte(`{"parent":{"metadata":{"resourceVersion":"7"}}}`), false), true},
		{"a newer resourceVersion", eventID("uc.req.c.sync.1.u", "t", []byte(`{"parent":{"metadata":{"resourceVersion":"8"}}}`), false), false},
		{"another subject", eventID("uc.req.c.sync.1.v", "t", []byte(`{"parent":{"metadata":{"resourceVersion":"7"}}}`), false), false},
		{"a forced resync", eventID("uc.req.c.sync.1.u", "t", []byte(`{"parent":{"metadata":{"resourceVersion":"7"}}}`), true), false},
	}
	for _, tt := range tests {
		if (tt.id == same) != tt.isSame {
			t.Errorf("%s: id %s, same as %s: %v, want %v", tt.name, tt.id, same, tt.id == same, tt.isSame)
		}
	}
}

func TestObserved(t *testing.T) {
	obj := func(uid, rv string) *unstructured.Unstructured {
		o := &unstructured.Unstructured{Object: map[string]any{}}
		o.SetUID(types.UID(uid))
		o.SetResourceVersion(rv)
		return o
	}
	ctl := &core.Controller{Generation: 1}
	req := func(controllerRV, childRV string) *hooks.SyncRequest {
		return &hooks.SyncRequest{
			Controller: obj("ctl", controllerRV),
			Parent:     obj("p", "7"),
			Children:   hooks.GroupedObjects{"ConfigMap.v1": {"a": obj("a", childRV)}},
		}
	}
	base := string(observed(ctl, req("1", "5")))
	if got := string(observed(ctl, req("2", "5"))); got != base {
		t.Errorf("the controller's status changed what a request observed: %q, want %q", got, base)
	}
	if got := string(observed(ctl, req("1", "6"))); got == base {
		t.Errorf("a child's new resourceVersion left what a request observed unchanged: %q", got)
	}
	if got := string(observed(&core.Controller{Generation: 2}, req("1", "5"))); got == base {
		t.Errorf("a new controller generation left what a request observed unchanged: %q", got)
	}
}

// TestPublishIsBounded: a publish whose acknowledgement never comes (a
// NATS server that restarted lost it) fails within busTimeout, not at the
// end of its sync's deadline, so the parent is retried soon and its worker
// is free again.
func TestPublishIsBounded(t *testing.T) {
	ns := bustest.Start(t, &server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	js := bustest.Connect(t, ns.ClientURL())
	// Something takes the request and never answers, as a server that
	// went away would.
	sub, err := js.Conn().SubscribeSync(bus.RequestPrefix + ".>")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	w := &Watcher{js: js, log: slog.Default(), tracer: tracing.Tracer(nil), republish: newRepublisher(js, slog.Default(), nil)}
	ctx, cancel := context.WithTimeout(t.Context(), itemTimeout)
	defer cancel()
	meta := bus.Meta{Address: bus.Address{Controller: "c", Hook: hooks.Sync, ParentUID: "u"}, Namespace: "ns", Name: "p"}
	start := time.Now()
	err = w.publish(ctx, meta, bus.RequestType(hooks.Sync), meta.RequestSubject(), map[string]string{}, "")
	if took := time.Since(start); err == nil || took > 2*busTimeout {
		t.Fatalf("publish returned %v after %s, want an error within %s", err, took.Round(time.Millisecond), busTimeout)
	}
}
