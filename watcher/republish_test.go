package watcher

import (
	"encoding/json"
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
			if got := len(resynced) == 1; got != tt.republish || (got && resynced[0] != key) {
				t.Fatalf("resynced %v, want a forced resync: %v", resynced, tt.republish)
			}
			r.mu.Lock()
			rec := r.last[key]
			r.mu.Unlock()
			switch {
			case tt.fence != nil && tt.fence.Request == id && rec != nil:
				t.Errorf("an applied request is still remembered: %+v", rec)
			case tt.republish && (rec == nil || rec.nextRetries(rec.uid) != 1):
				t.Errorf("after a re-publish the parent's request is %+v, want the next one counted as its first retry", rec)
			}
		})
	}
}

// TestFailureBackoff: the k-th retry of a failing parent waits first
// doubled k-1 times, up to maxRetryDelay, less up to a tenth as jitter: the
// waits grow even with the most jitter on one and none on the next.
func TestFailureBackoff(t *testing.T) {
	for _, tt := range []struct {
		first time.Duration
		want  []time.Duration
	}{
		{time.Second, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 32 * time.Second,
			64 * time.Second, 128 * time.Second, 256 * time.Second, 512 * time.Second, maxRetryDelay, maxRetryDelay}},
		{800 * time.Millisecond, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}}, // at least minFirstRetry
		{time.Minute, []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 16 * time.Minute, maxRetryDelay, maxRetryDelay}},
	} {
		for i, want := range tt.want {
			k := i + 1
			if got := failureBackoff(tt.first, k, 0); got != want {
				t.Errorf("first %s, retry %d: %s, want %s", tt.first, k, got, want)
			}
			if got := failureBackoff(tt.first, k, 0.999); got > want || got < want-want/10 {
				t.Errorf("first %s, retry %d with the most jitter: %s, want within a tenth below %s", tt.first, k, got, want)
			}
			if k > 1 && want < maxRetryDelay && failureBackoff(tt.first, k, 0.999) <= failureBackoff(tt.first, k-1, 0) {
				t.Errorf("first %s: retry %d may wait no longer than retry %d", tt.first, k, k-1)
			}
		}
	}
	if got := failureBackoff(time.Second, 1000, 0); got != maxRetryDelay {
		t.Errorf("retry 1000: %s, want %s", got, maxRetryDelay)
	}
}

// TestRetriesCount: the republisher counts a parent's retries in a row
// and defers its syncs until the next is due. A failure heard makes
// the next request a retry, due after the backoff; a failure heard again,
// or of another request, or of one published before the parent changed,
// changes nothing; a change of the parent starts again from none.
func TestRetriesCount(t *testing.T) {
	r := newRepublisher(nil, slog.Default(), nil)
	t.Cleanup(r.checks.ShutDown)
	r.firstRetry = func(controller, hook string) time.Duration { return 10 * time.Second }
	meta := bus.Meta{Address: bus.Address{Controller: "c", Hook: "sync", ParentUID: types.UID("u")}, Namespace: "ns", Name: "p"}
	key := parentKey{Controller: "c", Namespace: "ns", Name: "p"}
	waits := func(at time.Time) bool { return r.awaitingRetry(key, false, at) }

	r.published(meta, "a")
	if n := r.retries(meta); n != 0 || waits(time.Now()) {
		t.Fatalf("a new request: retries %d, waits %v; want 0, no wait", n, waits(time.Now()))
	}
	r.failed(key, "another", time.Now())
	if waits(time.Now()) {
		t.Fatal("a failure of another request makes the parent wait")
	}
	failedAt := time.Now()
	r.failed(key, "a", failedAt)
	r.failed(key, "a", failedAt.Add(time.Second)) // heard again, from elsewhere
	r.mu.Lock()
	retryAt := r.last[key].retryAt
	r.mu.Unlock()
	if wait := retryAt.Sub(failedAt); wait < 9*time.Second || wait > 10*time.Second {
		t.Fatalf("the first retry is due %s after the failure, want 10s less up to a tenth", wait)
	}
	if !waits(time.Now()) || !r.awaitingRetry(key, true, time.Now()) || waits(retryAt) {
		t.Fatal("the parent does not wait until its retry is due")
	}
	if !r.last[key].resyncDeferred {
		t.Fatal("a resync deferred until the retry is not remembered")
	}
	if n := r.retries(meta); n != 1 {
		t.Fatalf("the request after a failure counts %d retries, want 1", n)
	}
	r.published(meta, "b")
	if n := r.retries(meta); n != 1 || waits(time.Now()) {
		t.Fatalf("the retry: retries %d, waits %v; want 1, no wait", n, waits(time.Now()))
	}
	failedAt = time.Now()
	r.failed(key, "", failedAt) // uc's report on the parent
	r.mu.Lock()
	retryAt, resyncDeferred := r.last[key].retryAt, r.last[key].resyncDeferred
	r.mu.Unlock()
	if wait := retryAt.Sub(failedAt); wait < 18*time.Second || wait > 20*time.Second {
		t.Fatalf("the second retry is due %s after the failure, want 20s less up to a tenth", wait)
	}
	if resyncDeferred {
		t.Fatal("a resync deferred before the retry is still deferred after it")
	}
	r.published(meta, "c")
	if n := r.retries(meta); n != 2 {
		t.Fatalf("the second retry counts %d retries, want 2", n)
	}
	// uc's report of a first delivery that failed, then the dead letter
	// after the delivery policy's retries: the backoff counts from the
	// dead letter.
	r.failed(key, "", time.Now())
	deadLetter := time.Now().Add(5 * time.Second)
	r.failed(key, "c", deadLetter)
	r.failed(key, "", deadLetter.Add(time.Minute)) // seen again on the parent
	r.mu.Lock()
	retryAt = r.last[key].retryAt
	r.mu.Unlock()
	if wait := retryAt.Sub(deadLetter); wait < 36*time.Second || wait > 40*time.Second {
		t.Fatalf("the third retry is due %s after the dead letter, want 40s less up to a tenth", wait)
	}

	r.changed(key, time.Now())
	r.failed(key, "c", time.Now()) // of what the parent was before it changed
	if n := r.retries(meta); n != 0 || waits(time.Now()) {
		t.Fatalf("after a change: retries %d, waits %v; want 0, no wait", n, waits(time.Now()))
	}
	other := meta
	other.ParentUID = "v" // a parent of the same name, made anew
	r.published(meta, "d")
	r.failed(key, "d", time.Now())
	if n := r.retries(other); n != 0 {
		t.Fatalf("a new parent of the same name counts %d retries, want 0", n)
	}
}

// TestRetryFollowsItsRequest: once its retry is due, a parent whose last
// request failed is published again, forced, if the request is nowhere;
// not while it is still on its way (a delivery that failed and is tried
// again), and a resync deferred meanwhile is made once it was applied.
func TestRetryFollowsItsRequest(t *testing.T) {
	meta := bus.Meta{Address: bus.Address{Controller: "c", Hook: "sync", Partition: 3, ParentUID: "uid-1"}, Namespace: "ns", Name: "p"}
	key := parentKey{Controller: "c", Namespace: "ns", Name: "p"}
	for _, tt := range []struct {
		name    string
		on      string // where the request waits
		applied bool
		want    []parentKey
		failed  bool // still taken to have failed after the check
	}{
		{"failed", "", false, []parentKey{key}, true},
		{"tried again by its worker", meta.RequestSubject(), false, nil, false},
		{"applied after all", "", true, []parentKey{key}, false}, // the resync deferred
	} {
		t.Run(tt.name, func(t *testing.T) {
			js := bustest.JetStream(t)
			ctx := t.Context()
			kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: bus.FenceBucket, Storage: jetstream.MemoryStorage})
			if err != nil {
				t.Fatal(err)
			}
			if tt.applied {
				if _, err := kv.Put(ctx, string(meta.ParentUID), bus.Fence{Observation: 7, Request: "a"}.Value()); err != nil {
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
			t.Cleanup(r.checks.ShutDown)
			r.firstRetry = func(string, string) time.Duration { return time.Millisecond }
			r.published(meta, "a")
			r.failed(key, "a", time.Now().Add(-time.Second)) // its retry is due
			r.mu.Lock()
			r.last[key].resyncDeferred = true
			r.mu.Unlock()
			r.check(ctx, key)
			if fmt.Sprint(resynced) != fmt.Sprint(tt.want) {
				t.Fatalf("resynced %v, want %v", resynced, tt.want)
			}
			r.mu.Lock()
			rec := r.last[key]
			r.mu.Unlock()
			switch {
			case tt.applied && rec != nil:
				t.Errorf("an applied request is still remembered: %+v", rec)
			case !tt.applied && (rec == nil || rec.failed != tt.failed):
				t.Errorf("after the check the parent's request is %+v, want failed %v", rec, tt.failed)
			}
		})
	}
}

// TestRepublishAsWatcherUser: the watcher's least-privilege NATS user may
// look for a request along the whole pipeline.
func TestRepublishAsWatcherUser(t *testing.T) {
	as := busWithUsers(t)
	ctx := t.Context()
	if _, err := as(natsauth.Applier).CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: bus.FenceBucket}); err != nil {
		t.Fatal(err)
	}
	r := newRepublisher(as(natsauth.Watcher), slog.Default(), nil)
	meta := bus.Meta{Address: bus.Address{Controller: "c", Hook: "sync", ParentUID: "u"}, Name: "p"}
	where, _, err := r.find(ctx, &lastRequest{uid: meta.ParentUID, id: "x", request: meta.RequestSubject(), reply: meta.ReplySubject()}, time.Time{})
	if err != nil || where != "" {
		t.Fatalf("find = %q, %v; want a lost request", where, err)
	}
}

// busWithUsers runs a NATS server with uc's users (natsauth.Users, of
// bus.DefaultPartitions), every password "pw", and uc's streams, created
// by the dispatcher's user; as connects as a role's user.
func busWithUsers(t *testing.T) (as func(role string) jetstream.JetStream) {
	t.Helper()
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
	as = func(role string) jetstream.JetStream {
		return bustest.Connect(t, ns.ClientURL(), nats.UserInfo(natsauth.RoleUser(role), "pw"), nats.CustomInboxPrefix(natsauth.RoleInbox(role)))
	}
	if err := topology.EnsureStreams(t.Context(), as(natsauth.Dispatcher), topology.Streams, topology.Options{}); err != nil {
		t.Fatal(err)
	}
	return as
}

// TestOnItsWayBackoff: a request found on its way again and again is
// looked for at doubling intervals, up to maxOnItsWayWait.
func TestOnItsWayBackoff(t *testing.T) {
	for _, tt := range []struct {
		first time.Duration
		n     int
		want  time.Duration
	}{
		{time.Minute, 1, time.Minute},
		{time.Minute, 2, 2 * time.Minute},
		{time.Minute, 4, 8 * time.Minute},
		{time.Minute, 5, 8 * time.Minute},
		{time.Minute, 1000, 8 * time.Minute},
		{20 * time.Minute, 1, 8 * time.Minute},
		{time.Second, 3, 4 * time.Second},
	} {
		if got := onItsWayBackoff(tt.first, tt.n); got != tt.want {
			t.Errorf("onItsWayBackoff(%v, %d) = %v, want %v", tt.first, tt.n, got, tt.want)
		}
	}
}

// TestRepublishLooksInSnapshots: the looks due together share one snapshot
// of each stream's subjects instead of a stream info each; a snapshot
// taken before a request was published does not answer for it.
func TestRepublishLooksInSnapshots(t *testing.T) {
	js, r, resynced, infos := republisherOnBus(t)
	ctx := t.Context()
	const parents = 20
	for i := range parents { // half wait for a hook, half for an applier
		subject := testParent(i).RequestSubject()
		if i%2 == 1 {
			subject = testParent(i).ReplySubject()
		}
		if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: subject, Data: []byte("{}")}); err != nil {
			t.Fatal(err)
		}
		r.published(testParent(i), fmt.Sprint("id-", i))
	}
	if _, err := r.open(ctx); err != nil { // its stream lookups are not looks
		t.Fatal(err)
	}
	if err := js.Conn().Flush(); err != nil {
		t.Fatal(err)
	}
	before, _, _ := infos.Pending()
	for i := range parents {
		r.check(ctx, keyOf(testParent(i)))
	}
	if len(*resynced) != 0 {
		t.Fatalf("parents on their way were published again: %v", *resynced)
	}
	if err := js.Conn().Flush(); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := infos.Pending(); got-before > 2 {
		t.Errorf("%d looks asked for %d stream infos, want one snapshot of each stream", parents, got-before)
	}

	// Parent 0's request is taken and a new one, lost, is published: the
	// snapshot that held the first must not answer for the second.
	requests, err := js.Stream(ctx, bus.RequestStream)
	if err != nil {
		t.Fatal(err)
	}
	if err := requests.Purge(ctx, jetstream.WithPurgeSubject(testParent(0).RequestSubject())); err != nil {
		t.Fatal(err)
	}
	r.published(testParent(0), "id-0-again")
	r.check(ctx, keyOf(testParent(0)))
	if len(*resynced) != 1 || (*resynced)[0] != keyOf(testParent(0)) {
		t.Fatalf("resynced %v, want the lost request's parent %v published again", *resynced, keyOf(testParent(0)))
	}
}

// TestRepublishSnapshotBeforeFailure: a snapshot that saw a request on its
// way before its failure was heard does not clear the failure: the retry
// is published when due.
func TestRepublishSnapshotBeforeFailure(t *testing.T) {
	js, r, resynced, _ := republisherOnBus(t)
	ctx := t.Context()
	meta := testParent(1)
	key := keyOf(meta)
	if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: meta.RequestSubject(), Data: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	r.published(meta, "id-1")
	r.check(ctx, key) // the snapshot sees it waiting for a hook
	if len(*resynced) != 0 {
		t.Fatalf("a request on its way was published again: %v", *resynced)
	}

	// Its hook fails it for good: dead-lettered, it leaves UC_REQUESTS.
	requests, err := js.Stream(ctx, bus.RequestStream)
	if err != nil {
		t.Fatal(err)
	}
	if err := requests.Purge(ctx, jetstream.WithPurgeSubject(meta.RequestSubject())); err != nil {
		t.Fatal(err)
	}
	r.failed(key, "id-1", time.Now())
	r.mu.Lock()
	r.last[key].retryAt = time.Now() // its retry is due
	r.mu.Unlock()
	r.check(ctx, key)
	if len(*resynced) != 1 || (*resynced)[0] != key {
		t.Fatalf("resynced %v, want the failed request's parent %v asked again", *resynced, key)
	}
}

// TestRepublishFailuresShareSnapshots: the retries of a burst of failures,
// each heard after the last snapshot, do not take a snapshot each.
func TestRepublishFailuresShareSnapshots(t *testing.T) {
	js, r, resynced, infos := republisherOnBus(t)
	ctx := t.Context()
	const parents = 10
	for i := range parents {
		r.published(testParent(i), fmt.Sprint("id-", i))
		r.failed(keyOf(testParent(i)), fmt.Sprint("id-", i), time.Now())
		r.mu.Lock()
		r.last[keyOf(testParent(i))].retryAt = time.Now()
		r.mu.Unlock()
		r.check(ctx, keyOf(testParent(i)))
	}
	if len(*resynced) != parents {
		t.Fatalf("%d failed parents asked again, want %d", len(*resynced), parents)
	}
	if err := js.Conn().Flush(); err != nil {
		t.Fatal(err)
	}
	pending, _, err := infos.Pending()
	if err != nil {
		t.Fatal(err)
	}
	snapshots := 0
	for range pending {
		m, err := infos.NextMsg(time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var req struct {
			Filter string `json:"subjects_filter"`
		}
		if len(m.Data) > 0 { // empty: the stream's lookup
			if err := json.Unmarshal(m.Data, &req); err != nil {
				t.Fatal(err)
			}
		}
		if strings.HasSuffix(req.Filter, ">") { // the stream's wildcard: a snapshot
			snapshots++
		}
	}
	if snapshots > 2 {
		t.Errorf("%d failed parents took %d snapshots, want one of each stream", parents, snapshots)
	}
}

// republisherOnBus is a republisher whose checks are due at once, on a bus
// with uc's streams and the fence bucket; the parents it published again;
// and a subscription to the stream infos asked on the bus.
func republisherOnBus(t *testing.T) (jetstream.JetStream, *republisher, *[]parentKey, *nats.Subscription) {
	t.Helper()
	js := bustest.JetStream(t)
	if _, err := js.CreateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: bus.FenceBucket, Storage: jetstream.MemoryStorage}); err != nil {
		t.Fatal(err)
	}
	infos, err := js.Conn().SubscribeSync("$JS.API.STREAM.INFO.>")
	if err != nil {
		t.Fatal(err)
	}
	resynced := &[]parentKey{}
	r := newRepublisher(js, slog.Default(), func(k parentKey) { *resynced = append(*resynced, k) })
	r.grace = 0
	return js, r, resynced, infos
}

// testParent is the i-th parent of controller c.
func testParent(i int) bus.Meta {
	return bus.Meta{Address: bus.Address{Controller: "c", Hook: "sync", Partition: i % 4, ParentUID: types.UID(fmt.Sprint("uid-", i))},
		Namespace: "ns", Name: fmt.Sprint("p-", i)}
}
