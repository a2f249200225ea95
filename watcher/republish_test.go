package watcher

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/types"

	"universalcontroller.dev/uc/internal/bustest"
	"universalcontroller.dev/uc/internal/natsauth"
	"universalcontroller.dev/uc/internal/topology"
	"universalcontroller.dev/uc/schemas/bus"
)

// TestRepublish: a parent is published again when its last request is
// neither in UC_REQUESTS, nor answered in UC_REPLIES, nor named by its
// fence; not while it is somewhere along the pipeline.
func TestRepublish(t *testing.T) {
	meta := bus.Meta{Address: bus.Address{Controller: "c", Hook: "sync", Partition: 3, ParentUID: "uid-1"}, Namespace: "ns", Name: "p"}
	const id = "0123abcd"
	for _, tt := range []struct {
		name  string
		fence *bus.Fence
		// on is where a message waits: a request or reply subject.
		on        string
		republish bool
	}{
		{"lost", nil, "", true},
		{"waiting for a hook", nil, meta.RequestSubject(), false},
		{"waiting for an applier", nil, meta.ReplySubject(), false},
		{"applied", &bus.Fence{Observation: 7, Request: id}, "", false},
		{"an older request applied", &bus.Fence{Observation: 5, Request: "older"}, "", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			js := bustest.JetStream(t)
			ctx := t.Context()
			kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: bus.FenceBucket, Storage: jetstream.MemoryStorage})
			if err != nil {
				t.Fatal(err)
			}
			if tt.fence != nil {
				if _, err := kv.Put(ctx, string(meta.ParentUID), tt.fence.Value()); err != nil {
					t.Fatal(err)
				}
			}
			if tt.on != "" {
				if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: tt.on, Data: []byte("{}")}); err != nil {
					t.Fatal(err)
				}
			}
			var resynced []parentKey
			r := newRepublisher(js, slog.Default(), func(k parentKey) { resynced = append(resynced, k) })
			r.grace = 0 // every check is due at once
			r.published(meta, id)
			key := parentKey{Controller: "c", Namespace: "ns", Name: "p"}
			r.check(ctx, key)
			if got := len(resynced) == 1; got != tt.republish || (got && resynced[0] != parentKey{Controller: "c", Namespace: "ns", Name: "p", Resync: true}) {
				t.Fatalf("resynced %v, want a forced resync: %v", resynced, tt.republish)
			}
			r.mu.Lock()
			rec := r.last[key]
			r.mu.Unlock()
			switch {
			case tt.fence != nil && tt.fence.Request == id && rec != nil:
				t.Errorf("an applied request is still remembered: %+v", rec)
			case tt.republish && (rec == nil || rec.republished != 1):
				t.Errorf("after a re-publish the parent's request is %+v, want it counted once", rec)
			}
		})
	}
}

// TestRepublishWaits: a parent published again waits twice as long each
// time for its request to be applied, up to a bound; a request of a new
// observed state starts again from the grace period.
func TestRepublishWaits(t *testing.T) {
	r := newRepublisher(nil, slog.Default(), nil)
	for n, want := range []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 16 * time.Minute, 16 * time.Minute} {
		if got := r.wait(n); got != want {
			t.Errorf("wait after %d re-publishes: %s, want %s", n, got, want)
		}
	}
	if got := r.wait(1000); got != maxRepublishGrace {
		t.Errorf("wait after 1000 re-publishes: %s, want %s", got, maxRepublishGrace)
	}
	meta := bus.Meta{Address: bus.Address{Controller: "c", Hook: "sync", ParentUID: types.UID("u")}, Name: "p"}
	key := parentKey{Controller: "c", Name: "p"}
	same := eventID(meta.RequestSubject(), "t", []byte("state 1"), false)
	for _, tt := range []struct {
		name string
		id   string
		want int
	}{
		{"the same state, forced", eventID(meta.RequestSubject(), "t", []byte("state 1"), true), 3},
		{"a new state", eventID(meta.RequestSubject(), "t", []byte("state 2"), false), 0},
	} {
		r.published(meta, same)
		r.last[key].republished = 3
		r.published(meta, tt.id)
		if got := r.last[key].republished; got != tt.want {
			t.Errorf("%s: counted %d re-publishes, want %d", tt.name, got, tt.want)
		}
	}
}

// TestRepublishAsWatcherUser: the watcher's least-privilege NATS user may
// look for a request along the whole pipeline.
func TestRepublishAsWatcherUser(t *testing.T) {
	users, err := natsauth.Users(bus.DefaultPartitions)
	if err != nil {
		t.Fatal(err)
	}
	var conf strings.Builder
	for _, u := range users {
		fmt.Fprintf(&conf, "%s: \"pw\"\n", natsauth.PasswordVariable(u.Name))
	}
	conf.WriteString(natsauth.Config(users))
	path := filepath.Join(t.TempDir(), "nats.conf")
	if err := os.WriteFile(path, []byte(conf.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(path)
	if err != nil {
		t.Fatal(err)
	}
	opts.Host, opts.Port, opts.JetStream, opts.StoreDir, opts.NoLog, opts.NoSigs = "127.0.0.1", -1, true, t.TempDir(), true, true
	ns := bustest.Start(t, opts)
	ctx := t.Context()
	as := func(role string) jetstream.JetStream {
		return bustest.Connect(t, ns.ClientURL(), nats.UserInfo(natsauth.RoleUser(role), "pw"), nats.CustomInboxPrefix(natsauth.RoleInbox(role)))
	}
	if err := topology.EnsureStreams(ctx, as(natsauth.Dispatcher), topology.Streams, topology.Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := as(natsauth.Applier).CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: bus.FenceBucket}); err != nil {
		t.Fatal(err)
	}
	r := newRepublisher(as(natsauth.Watcher), slog.Default(), nil)
	meta := bus.Meta{Address: bus.Address{Controller: "c", Hook: "sync", ParentUID: "u"}, Name: "p"}
	where, err := r.find(ctx, &lastRequest{uid: meta.ParentUID, id: "x", request: meta.RequestSubject(), reply: meta.ReplySubject()})
	if err != nil || where != "" {
		t.Fatalf("find = %q, %v; want a lost request", where, err)
	}
}
