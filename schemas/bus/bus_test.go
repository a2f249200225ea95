package bus

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"testing"
	"unsafe"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	k8stypes "k8s.io/apimachinery/pkg/types"
)

func TestSubjects(t *testing.T) {
	a := Address{Controller: "foo.example.com", Hook: "sync", Partition: 7, ParentUID: "0b5c-11"}
	for got, want := range map[string]string{
		a.RequestSubject():                      "uc.req.foo_example_com.sync.7.0b5c-11",
		a.ReplySubject():                        "uc.reply.foo_example_com.sync.7.0b5c-11",
		a.DeadLetterSubject():                   "uc.dlq.foo_example_com.sync.7.0b5c-11",
		HookRequests("foo.example.com", "sync"): "uc.req.foo_example_com.sync.>",
		HookConsumer("foo.example.com", "sync"): "hook_foo_example_com_sync",
		a.ResyncSubject():                       "uc.resync.foo_example_com.sync.7.0b5c-11",
		ParentSubjects(RequestPrefix, "foo.example.com", "*", "0b5c-11"): "uc.req.foo_example_com.*.*.0b5c-11",
		ControllerSubjects(DeadLetterPrefix, "foo.example.com"):          "uc.dlq.foo_example_com.>",
		ControllerSubjects(DeadLetterPrefix, ""):                         "uc.dlq.>",
	} {
		if got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
}

func TestPartition(t *testing.T) {
	seen := map[int]bool{}
	for i := range 1000 {
		uid := k8stypes.UID(fmt.Sprintf("%08x-7d2c-4b1e-9f3a-%012d", i*2654435761, i))
		p := Partition(uid, 32)
		if p < 0 || p >= 32 {
			t.Fatalf("partition %d out of range", p)
		}
		if p != Partition(uid, 32) {
			t.Fatal("partition is not stable")
		}
		seen[p] = true
	}
	if len(seen) < 30 {
		t.Errorf("1000 parents fell in only %d of 32 partitions", len(seen))
	}
	if Partition("x", 1) != 0 {
		t.Error("one partition must be partition 0")
	}
}

func TestEventRoundTrip(t *testing.T) {
	base := Meta{
		Address:   Address{Controller: "c", Hook: "sync", Partition: 3, ParentUID: "u-1"},
		Namespace: "ns", Name: "p.with.dots", Generation: 4, ResourceVersion: "99", Observation: 1234567890123,
		RequestID: "req-1",
	}
	latest, older := base, base
	latest.Revisions = []string{"aaaa", "bbbb"}
	older.Revisions, older.Revision = latest.Revisions, "bbbb"
	retry := base
	retry.Failures = 2
	for name, m := range map[string]Meta{"plain": base, "latest revision": latest, "older revision": older, "a retry": retry} {
		t.Run(name, func(t *testing.T) { roundTrip(t, m) })
	}
	if s := older.ReplySubject(); s != "uc.reply.c.sync.3.u-1_bbbb" {
		t.Errorf("older revision's reply subject %q", s)
	}
	if s := latest.ReplySubject(); s != "uc.reply.c.sync.3.u-1" {
		t.Errorf("latest revision's reply subject %q", s)
	}
}

func roundTrip(t *testing.T, m Meta) {
	e := event.New()
	e.SetID("id-1")
	e.SetType(ResponseType("sync"))
	e.SetSource("/test")
	m.SetOn(&e)
	if err := e.SetData(event.ApplicationJSON, map[string]any{"children": []any{}}); err != nil {
		t.Fatal(err)
	}
	msg, err := ToMsg(context.Background(), m.ReplySubject(), &e)
	if err != nil {
		t.Fatal(err)
	}
	if msg.Header.Get("ce-type") != ResponseType("sync") || msg.Header.Get("ce-ucparentuid") != "u-1" {
		t.Fatalf("not binary mode: headers %v", msg.Header)
	}
	got, err := FromMsg(context.Background(), msg.Subject, msg.Header, msg.Data)
	if err != nil {
		t.Fatal(err)
	}
	gm, err := MetaOf(got)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(gm, m) {
		t.Fatalf("meta = %+v, want %+v", gm, m)
	}
	if string(got.Data()) != `{"children":[]}` {
		t.Fatalf("data = %s", got.Data())
	}
}

func TestMetaOfRejectsIncompleteEvents(t *testing.T) {
	e := event.New()
	e.SetID("x")
	e.SetExtension(ExtController, "c")
	if _, err := MetaOf(&e); err == nil {
		t.Fatal("an event without the parent's identity was accepted")
	}
}

func TestMetaOfReplyChecksTheSubject(t *testing.T) {
	m := Meta{Address: Address{Controller: "b", Hook: "sync", Partition: 1, ParentUID: "u"}, Name: "n", Observation: 1}
	e := event.New()
	e.SetID("id")
	e.SetType(ResponseType("sync"))
	e.SetSource("/test")
	m.SetOn(&e)
	forged := m
	forged.Controller = "a"
	for _, tt := range []struct {
		subject string
		ok      bool
	}{
		{m.ReplySubject(), true},
		{forged.ReplySubject(), false}, // a worker of a, claiming to be b's
		{"uc.reply.b.sync.2.u", false},
	} {
		if _, err := MetaOfReply(tt.subject, &e); (err == nil) != tt.ok {
			t.Errorf("reply on %s: err %v, want ok=%v", tt.subject, err, tt.ok)
		}
	}
}

func TestPartitionKey(t *testing.T) {
	for _, n := range []int{0, 7, 31, 1024} {
		got, err := ParsePartitionKey(PartitionKey(n))
		if err != nil || got != n {
			t.Errorf("ParsePartitionKey(PartitionKey(%d)) = %d, %v", n, got, err)
		}
	}
	for _, key := range []string{"", "p", "7", "q7", "p-1", "px"} {
		if n, err := ParsePartitionKey(key); err == nil {
			t.Errorf("ParsePartitionKey(%q) = %d, want an error", key, n)
		}
	}
}

func TestParseFence(t *testing.T) {
	for _, tt := range []struct {
		value string
		want  Fence
		ok    bool
	}{
		{"17 a1b2-c3 4 1234", Fence{17, "a1b2-c3", 4, "1234"}, true},
		{"17 a1b2-c3", Fence{Observation: 17, Request: "a1b2-c3"}, true},   // an older uc's
		{"17", Fence{Observation: 17}, true},                               // an older uc's
		{"1795804702591086933 a1 4 1234", Fence{0, "a1", 4, "1234"}, true}, // an older uc's clock: older than any
		{"", Fence{}, false},
		{"x a1", Fence{}, false},
		{"17 a1 4", Fence{}, false},
		{"17 a1 x 1234", Fence{}, false},
		{"17 a1 4 1234 more", Fence{}, false},
	} {
		got, err := ParseFence([]byte(tt.value))
		if got != tt.want || (err == nil) != tt.ok {
			t.Errorf("ParseFence(%q) = %+v, %v; want %+v, ok %v", tt.value, got, err, tt.want, tt.ok)
		}
	}
	f := Fence{98770, "abc", 3, "98765"}
	if got, err := ParseFence(f.Value()); got != f || err != nil {
		t.Errorf("ParseFence(%q) = %+v, %v; want %+v", f.Value(), got, err, f)
	}
}

// TestMetaOfCopiesStrings: a Meta read from a message off the wire holds
// none of the message's header block, which nats.go keeps as one string
// whose substrings are the header values: a parent's UID kept as a map key
// would keep the whole block.
func TestMetaOfCopiesStrings(t *testing.T) {
	m := Meta{Address: Address{Controller: "c", Hook: "sync", Partition: 3, ParentUID: "u-1", Revision: "bbbb"}, Namespace: "ns", Name: "p",
		Resource: "fanouts", ResourceVersion: "99", RequestID: "req-1", Revisions: []string{"aaaa", "bbbb"}}
	e := event.New()
	e.SetID("id-1")
	e.SetType(ResponseType("sync"))
	e.SetSource("/test")
	m.SetOn(&e)
	sent, err := ToMsg(context.Background(), m.ReplySubject(), &e)
	if err != nil {
		t.Fatal(err)
	}
	var block bytes.Buffer // the header block as it comes off the wire
	block.WriteString("NATS/1.0\r\n")
	for k, vs := range sent.Header {
		for _, v := range vs {
			fmt.Fprintf(&block, "%s: %s\r\n", k, v)
		}
	}
	block.WriteString("\r\n")
	header, err := nats.DecodeHeadersMsg(block.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	received, err := FromMsg(context.Background(), sent.Subject, header, sent.Data)
	if err != nil {
		t.Fatal(err)
	}
	got, err := MetaOf(received)
	if err != nil {
		t.Fatal(err)
	}
	var inBlock []string // the header values' memory
	for _, vs := range header {
		inBlock = append(inBlock, vs...)
	}
	for name, s := range map[string]string{"Controller": got.Controller, "Hook": got.Hook, "ParentUID": string(got.ParentUID),
		"Namespace": got.Namespace, "Name": got.Name, "Resource": got.Resource, "ResourceVersion": got.ResourceVersion,
		"RequestID": got.RequestID, "Revisions[0]": got.Revisions[0], "Revision": got.Revision} {
		for _, v := range inBlock {
			p, start := uintptr(unsafe.Pointer(unsafe.StringData(s))), uintptr(unsafe.Pointer(unsafe.StringData(v)))
			if p >= start && p < start+uintptr(len(v)) {
				t.Errorf("Meta.%s %q is in the header value %q", name, s, v)
			}
		}
	}
}
