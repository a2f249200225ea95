package contracttest

import (
	"context"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/cloudevents/sdk-go/v2/extensions"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"universalcontroller.dev/uc/examples/foo"
	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/schemas/jsonschema"
	"universalcontroller.dev/uc/sdk/go/hook"
)

// tracer makes the spans of the watcher's publish and the worker's call:
// sampled, exported nowhere.
var tracer = sdktrace.NewTracerProvider().Tracer("roundtrip")

// request builds a hook request the way watcher.publish does and encodes it
// as the NATS message the watcher publishes.
func request(t *testing.T, controller string, parent *unstructured.Unstructured, hook string, data any) *nats.Msg {
	t.Helper()
	meta := bus.Meta{
		Address: bus.Address{
			Controller: controller,
			Hook:       hook,
			Partition:  bus.Partition(parent.GetUID(), bus.DefaultPartitions),
			ParentUID:  parent.GetUID(),
		},
		Namespace:       parent.GetNamespace(),
		Name:            parent.GetName(),
		Generation:      parent.GetGeneration(),
		ResourceVersion: parent.GetResourceVersion(),
		Observation:     1234,
		Observed:        time.Now(),
	}
	e := event.New()
	e.SetID(uuid.NewString())
	e.SetType(bus.RequestType(hook))
	e.SetSource("/universalcontroller/" + controller)
	e.SetSubject(meta.Key())
	e.SetTime(time.Now())
	meta.SetOn(&e)
	ctx, span := tracer.Start(context.Background(), "publish")
	defer span.End()
	bus.InjectTrace(ctx, &e)
	if err := e.SetData(event.ApplicationJSON, data); err != nil {
		t.Fatal(err)
	}
	msg, err := bus.ToMsg(context.Background(), meta.RequestSubject(), &e)
	if err != nil {
		t.Fatal(err)
	}
	return msg
}

// reply answers a decoded request the way the worker SDK (worker.publish)
// does and encodes the reply as the NATS message the worker publishes.
func reply(t *testing.T, req *event.Event, data any) *nats.Msg {
	t.Helper()
	meta, err := bus.MetaOf(req)
	if err != nil {
		t.Fatal(err)
	}
	e := event.New()
	e.SetID(uuid.NewString())
	e.SetType(bus.ResponseType(meta.Hook))
	e.SetSource("/universalcontroller/" + meta.Controller + "/worker")
	e.SetSubject(req.Subject())
	e.SetTime(time.Now())
	meta.RequestID = req.ID()
	meta.SetOn(&e)
	ctx, span := tracer.Start(bus.ExtractTrace(context.Background(), req), "hook")
	defer span.End()
	bus.InjectTrace(ctx, &e)
	if err := e.SetData(event.ApplicationJSON, data); err != nil {
		t.Fatal(err)
	}
	msg, err := bus.ToMsg(context.Background(), meta.ReplySubject(), &e)
	if err != nil {
		t.Fatal(err)
	}
	return msg
}

// receive decodes a message as its consumer does and validates the event's
// data against the schema its type maps to.
func receive(t *testing.T, msg *nats.Msg) *event.Event {
	t.Helper()
	e, err := bus.FromMsg(context.Background(), msg.Subject, msg.Header, msg.Data)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := jsonschema.For(e.Type()); !ok {
		t.Fatalf("type %q has no schema", e.Type())
	}
	if err := Validate(e.Type(), e.Data()); err != nil {
		t.Fatalf("%s on %s: %v\ndata: %s", e.Type(), msg.Subject, err, e.Data())
	}
	return e
}

// TestBusRoundTrip sends each hook's request and the worker's reply through
// bus.ToMsg and bus.FromMsg and validates what arrives.
func TestBusRoundTrip(t *testing.T) {
	parent := fooParent(t)
	deployment := observedDeployment(t, parent)
	for _, tc := range []struct {
		hook   string
		req    any
		answer func(*event.Event) any
	}{
		{hooks.Sync, syncRequest(t, "v1", false, deployment), func(e *event.Event) any {
			resp, err := hook.Sync(foo.Sync).Handle(context.Background(), e.Data())
			if err != nil {
				t.Fatal(err)
			}
			return resp
		}},
		{hooks.Finalize, syncRequest(t, "v1", true, deployment), func(*event.Event) any {
			return &hooks.SyncResponse{Finalized: true}
		}},
		{hooks.Customize, &hooks.CustomizeRequest{Controller: fooController(t), Parent: parent}, func(*event.Event) any {
			return &hooks.CustomizeResponse{RelatedResources: []hooks.RelatedResourceRule{{APIVersion: "v1", Resource: "configmaps"}}}
		}},
	} {
		t.Run(tc.hook, func(t *testing.T) {
			reqMsg := request(t, "foo.example.com", parent, tc.hook, tc.req)
			req := receive(t, reqMsg)
			if req.Type() != bus.RequestType(tc.hook) {
				t.Errorf("request type %q", req.Type())
			}
			repMsg := reply(t, req, tc.answer(req))
			rep := receive(t, repMsg)
			if rep.Type() != bus.ResponseType(tc.hook) {
				t.Errorf("reply type %q", rep.Type())
			}

			// What docs/bus.md promises about subjects and extensions.
			if want := strings.Replace(reqMsg.Subject, bus.RequestPrefix+".", bus.ReplyPrefix+".", 1); repMsg.Subject != want {
				t.Errorf("reply subject %q, want the request's with the reply prefix, %q", repMsg.Subject, want)
			}
			if want := "uc.req.foo_example_com." + tc.hook + "."; !strings.HasPrefix(reqMsg.Subject, want) ||
				!strings.HasSuffix(reqMsg.Subject, "."+string(parent.GetUID())) {
				t.Errorf("request subject %q", reqMsg.Subject)
			}
			reqMeta, _ := bus.MetaOf(req)
			repMeta, err := bus.MetaOf(rep)
			if err != nil {
				t.Fatal(err)
			}
			if repMeta.RequestID != req.ID() {
				t.Errorf("reply %s = %q, want the request id %q", bus.ExtRequestID, repMeta.RequestID, req.ID())
			}
			repMeta.RequestID = ""
			if !reflect.DeepEqual(repMeta, reqMeta) {
				t.Errorf("reply meta %+v, want the request's %+v", repMeta, reqMeta)
			}
			traceparent := func(e *event.Event) string {
				s, _ := e.Extensions()[extensions.TraceParentExtension].(string)
				return s
			}
			if rt, qt := traceparent(rep), traceparent(req); len(rt) != 55 || rt[:36] != qt[:36] || rt == qt {
				t.Errorf("reply traceparent %q does not continue the request's %q", rt, qt)
			}
		})
	}
}

// TestWireHeaders pins the NATS headers bus.ToMsg writes, which docs/bus.md
// lists: binary mode, every attribute as a lower-case ce-* header, the
// content type as ce-datacontenttype (no content-type header).
func TestWireHeaders(t *testing.T) {
	parent := fooParent(t)
	reqMsg := request(t, foo.Controller, parent, hooks.Sync, syncRequest(t, "v1", false))
	req := receive(t, reqMsg)
	repMsg := reply(t, req, &hooks.SyncResponse{})
	common := []string{
		"ce-specversion", "ce-id", "ce-type", "ce-source", "ce-subject", "ce-time", "ce-datacontenttype", "ce-traceparent",
		"ce-uccontroller", "ce-uchook", "ce-ucparentuid", "ce-ucnamespace", "ce-ucname",
		"ce-ucgeneration", "ce-ucresourceversion", "ce-ucpartition", "ce-ucobservation", "ce-ucobserved",
	}
	for _, tc := range []struct {
		msg  *nats.Msg
		want []string
	}{
		{reqMsg, common},
		{repMsg, append(slices.Clone(common), "ce-ucrequestid")},
	} {
		got := slices.Sorted(maps.Keys(tc.msg.Header))
		if want := slices.Sorted(slices.Values(tc.want)); !slices.Equal(got, want) {
			t.Errorf("%s headers %q, want %q", tc.msg.Subject, got, want)
		}
		h := tc.msg.Header
		if h.Get("ce-specversion") != "1.0" || h.Get("ce-datacontenttype") != "application/json" {
			t.Errorf("%s: specversion %q, datacontenttype %q", tc.msg.Subject, h.Get("ce-specversion"), h.Get("ce-datacontenttype"))
		}
		if _, err := time.Parse(time.RFC3339Nano, h.Get("ce-time")); err != nil {
			t.Errorf("%s: ce-time: %v", tc.msg.Subject, err)
		}
	}
}

// TestWorkedExample is docs/bus.md's worked example, written as a client in
// another language would write it: uc must decode both messages, and their
// data must be valid.
func TestWorkedExample(t *testing.T) {
	const (
		subject   = "uc.req.foo-controller.sync.24.6f1c2a3e-0b5c-4d2e-9a1f-2b7c8d9e0f11"
		replySubj = "uc.reply.foo-controller.sync.24.6f1c2a3e-0b5c-4d2e-9a1f-2b7c8d9e0f11"
	)
	reqHeader := nats.Header{
		"ce-specversion":       {"1.0"},
		"ce-id":                {"5b0e6a52-6d0f-4c47-9a39-1f8f3c1f0a01"},
		"ce-type":              {"dev.universalcontroller.sync.request"},
		"ce-source":            {"/universalcontroller/foo-controller"},
		"ce-subject":           {"default/example-foo"},
		"ce-time":              {"2026-01-01T12:00:00.123456789Z"},
		"ce-datacontenttype":   {"application/json"},
		"ce-traceparent":       {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
		"ce-uccontroller":      {"foo-controller"},
		"ce-uchook":            {"sync"},
		"ce-ucparentuid":       {"6f1c2a3e-0b5c-4d2e-9a1f-2b7c8d9e0f11"},
		"ce-ucnamespace":       {"default"},
		"ce-ucname":            {"example-foo"},
		"ce-ucgeneration":      {"2"},
		"ce-ucresourceversion": {"48213"},
		"ce-ucpartition":       {"24"},
		"ce-ucobservation":     {"1767268800123456789"},
		"Nats-Msg-Id":          {"5b0e6a52-6d0f-4c47-9a39-1f8f3c1f0a01"},
	}
	reqBody := `{"controller":{"apiVersion":"universalcontroller.dev/v1alpha1","kind":"UniversalController",` +
		`"metadata":{"name":"foo-controller"},"spec":{}},` +
		`"parent":{"apiVersion":"samplecontroller.k8s.io/v1alpha1","kind":"Foo",` +
		`"metadata":{"name":"example-foo","namespace":"default","uid":"6f1c2a3e-0b5c-4d2e-9a1f-2b7c8d9e0f11","generation":2},` +
		`"spec":{"deploymentName":"example-foo","replicas":2}},` +
		`"children":{"Deployment.apps/v1":{}},"related":{},"finalizing":false}`
	repHeader := nats.Header{}
	for k, v := range reqHeader {
		repHeader[k] = v
	}
	for k, v := range map[string]string{
		"ce-id":          "0c3d9e7b-2a41-4f7c-8e55-6b1d2f3a4c02",
		"ce-type":        "dev.universalcontroller.sync.response",
		"ce-source":      "/hooks/foo-python",
		"ce-time":        "2026-01-01T12:00:00.2Z",
		"ce-traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-b7ad6b7169203331-01",
		"ce-ucrequestid": "5b0e6a52-6d0f-4c47-9a39-1f8f3c1f0a01",
		"Nats-Msg-Id":    "0c3d9e7b-2a41-4f7c-8e55-6b1d2f3a4c02",
	} {
		repHeader[k] = []string{v}
	}
	repBody := `{"status":{"availableReplicas":0},"children":[{"apiVersion":"apps/v1","kind":"Deployment",` +
		`"metadata":{"name":"example-foo"},"spec":{"replicas":2}}]}`

	req := receive(t, &nats.Msg{Subject: subject, Header: reqHeader, Data: []byte(reqBody)})
	rep := receive(t, &nats.Msg{Subject: replySubj, Header: repHeader, Data: []byte(repBody)})
	reqMeta, err := bus.MetaOf(req)
	if err != nil {
		t.Fatal(err)
	}
	repMeta, err := bus.MetaOf(rep)
	if err != nil {
		t.Fatal(err)
	}
	if reqMeta.RequestSubject() != subject || repMeta.ReplySubject() != replySubj {
		t.Errorf("subjects %q, %q", reqMeta.RequestSubject(), repMeta.ReplySubject())
	}
	if p := bus.Partition(reqMeta.ParentUID, bus.DefaultPartitions); p != reqMeta.Partition {
		t.Errorf("the example's partition is %d; with %d partitions it would be %d", reqMeta.Partition, bus.DefaultPartitions, p)
	}
	if repMeta.RequestID != req.ID() || rep.Type() != bus.ResponseType(reqMeta.Hook) {
		t.Errorf("reply: request id %q, type %q", repMeta.RequestID, rep.Type())
	}
}
