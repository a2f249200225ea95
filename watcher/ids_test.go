package watcher

import (
	"errors"
	"log/slog"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/workqueue"

	"universalcontroller.dev/uc/internal/bustest"
	"universalcontroller.dev/uc/internal/tracing"
	"universalcontroller.dev/uc/internal/verdict"
	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
)

// chainTest is one parent's requests published on an embedded JetStream
// with uc's streams and a fence bucket, by one watcher or, after a
// take-over, another.
type chainTest struct {
	t      *testing.T
	js     jetstream.JetStream
	fence  jetstream.KeyValue
	w      *Watcher
	key    parentKey
	meta   bus.Meta
	parent *unstructured.Unstructured
	// observed is the observation of the last request published: each
	// publish observes a newer state, at least the parent's
	// resourceVersion.
	observed int64
}

func newChainTest(t *testing.T) *chainTest {
	js := bustest.JetStream(t)
	fence, err := js.CreateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: bus.FenceBucket, Storage: jetstream.MemoryStorage})
	if err != nil {
		t.Fatal(err)
	}
	c := &chainTest{t: t, js: js, fence: fence,
		key:    parentKey{Controller: "c", Namespace: "ns", Name: "p"},
		meta:   bus.Meta{Address: bus.Address{Controller: "c", Hook: hooks.Sync, Partition: 1, ParentUID: "uid-1"}, Namespace: "ns", Name: "p"},
		parent: &unstructured.Unstructured{Object: map[string]any{}}}
	c.parent.SetUID("uid-1")
	c.setParent(1, "5")
	c.takeOver()
	return c
}

// takeOver replaces the watcher by a new one, as a standby that takes
// over: it knows nothing of the requests published before.
func (c *chainTest) takeOver() {
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[parentKey]())
	c.t.Cleanup(queue.ShutDown)
	republish := newRepublisher(c.js, slog.Default(), func(parentKey) {})
	c.t.Cleanup(republish.checks.ShutDown)
	c.w = &Watcher{js: c.js, log: slog.Default(), tracer: tracing.Tracer(nil), queue: queue, republish: republish, chain: newRequestChain(c.js)}
}

// setParent sets the parent's generation and resourceVersion as the cache
// holds it.
func (c *chainTest) setParent(generation int64, resourceVersion string) {
	c.parent.SetGeneration(generation)
	c.parent.SetResourceVersion(resourceVersion)
	c.meta.Generation, c.meta.ResourceVersion = generation, resourceVersion
}

// publish publishes the parent's request of an observed state, and tells
// whether the bus took it (it was not dropped as a duplicate).
func (c *chainTest) publish(state string, forced bool) (bool, error) {
	c.t.Helper()
	before := c.lastSeq()
	meta := c.meta
	c.observed = max(c.observed+1, parseVersion(c.parent.GetResourceVersion()))
	meta.Observation = c.observed
	_, err := c.w.publishRequest(c.t.Context(), c.key, forced, &meta, c.parent, map[string]string{"state": state}, []byte(state))
	return c.lastSeq() > before, err
}

func (c *chainTest) lastSeq() uint64 {
	c.t.Helper()
	s, err := c.js.Stream(c.t.Context(), bus.RequestStream)
	if err != nil {
		c.t.Fatal(err)
	}
	info, err := s.Info(c.t.Context())
	if err != nil {
		c.t.Fatal(err)
	}
	return info.State.LastSeq
}

// last is the request the bus holds for the parent.
func (c *chainTest) last() (id string, meta bus.Meta) {
	c.t.Helper()
	s, err := c.js.Stream(c.t.Context(), bus.RequestStream)
	if err != nil {
		c.t.Fatal(err)
	}
	msg, err := s.GetLastMsgForSubject(c.t.Context(), c.meta.RequestSubject())
	if err != nil {
		c.t.Fatal(err)
	}
	e, err := bus.FromMsg(c.t.Context(), msg.Subject, msg.Header, msg.Data)
	if err != nil {
		c.t.Fatal(err)
	}
	if meta, err = bus.MetaOf(e); err != nil {
		c.t.Fatal(err)
	}
	return e.ID(), meta
}

// apply advances the parent's fence as an applier does once it applied
// the reply to the last request.
func (c *chainTest) apply() {
	c.t.Helper()
	id, meta := c.last()
	f := bus.Fence{Observation: meta.Observation, Request: id, Generation: meta.Generation, ResourceVersion: meta.ResourceVersion}
	if _, err := c.fence.Put(c.t.Context(), string(c.meta.ParentUID), f.Value()); err != nil {
		c.t.Fatal(err)
	}
}

// TestRequestChain: every request that observed something other than the
// parent's last request reaches the bus at once, even a state observed
// before (a child deleted gives the state from before it was created), and
// so does one that observed the same as a last request applied since; one
// that observed the same as a last request not applied yet, or applied
// before it was published, is dropped as a duplicate, also when a watcher
// that took over publishes it.
func TestRequestChain(t *testing.T) {
	c := newChainTest(t)
	for i, step := range []struct {
		what     string
		state    string
		forced   bool
		takeOver bool // a standby takes over first
		apply    bool // the last request is applied first
		taken    bool
	}{
		{what: "a parent without children", state: "A", taken: true},
		{what: "the same state, not applied yet", state: "A"},
		{what: "its child created", state: "B", taken: true},
		{what: "its child deleted: the first state again", state: "A", taken: true},
		{what: "the same state again", state: "A"},
		{what: "a resync of the same state", state: "A", forced: true, taken: true},
		{what: "the same state after the resync", state: "A"},
		{what: "applied, then a child created and deleted before the watcher saw it", state: "A", apply: true, taken: true},
		{what: "the same state again", state: "A"},
		{what: "a child created again", state: "C", taken: true},
		{what: "the same state after a take-over", state: "C", apply: true, takeOver: true},
		{what: "the same state once more after the take-over", state: "C"},
		{what: "deleted again after the take-over", state: "A", taken: true},
		{what: "the same state after another take-over, not applied yet", state: "A", takeOver: true},
	} {
		if step.apply {
			c.apply()
		}
		if step.takeOver {
			c.takeOver()
		}
		taken, err := c.publish(step.state, step.forced)
		if err != nil {
			t.Fatalf("step %d, %s: %v", i, step.what, err)
		}
		if taken != step.taken {
			t.Errorf("step %d, %s (state %s): taken by the bus %v, want %v", i, step.what, step.state, taken, step.taken)
		}
	}
}

// TestRequestAfterTakeOver: a watcher that takes over waits until its
// cache holds the parent at least as new as the fence says was applied,
// and stamps its observations later than the applied one, whatever its
// clock says.
func TestRequestAfterTakeOver(t *testing.T) {
	c := newChainTest(t)
	c.setParent(2, "120")
	if taken, err := c.publish("A", false); !taken || err != nil {
		t.Fatalf("first request: taken %v, %v", taken, err)
	}
	c.apply()
	// The predecessor applied an observation its caches made later.
	f := bus.Fence{Observation: 125, Request: "x", Generation: 2, ResourceVersion: "120"}
	if _, err := c.fence.Put(t.Context(), string(c.meta.ParentUID), f.Value()); err != nil {
		t.Fatal(err)
	}
	c.takeOver()
	c.observed = 0
	for _, behind := range []struct {
		generation      int64
		resourceVersion string
	}{{1, "130"}, {2, "119"}, {1, "90"}, {2, "120"}} {
		c.setParent(behind.generation, behind.resourceVersion)
		if taken, err := c.publish("stale", false); taken || !errors.Is(err, errCacheBehind) || verdict.Of(err) != verdict.Wait {
			t.Errorf("the cache at generation %d, resourceVersion %s: taken %v, %v; want errCacheBehind, which waits", behind.generation, behind.resourceVersion, taken, err)
		}
		c.observed = 0 // each time, the caches are behind the fence's observation
	}
	c.setParent(2, "126")
	if taken, err := c.publish("B", false); !taken || err != nil {
		t.Fatalf("the cache caught up: taken %v, %v", taken, err)
	}
	if _, meta := c.last(); meta.Observation <= f.Observation {
		t.Errorf("observation %d, not after the applied %d", meta.Observation, f.Observation)
	}
}

// TestNotBehind: a parent is older than its last request by generation or
// by an integer resourceVersion; resourceVersions that are not integers
// are not compared.
func TestNotBehind(t *testing.T) {
	for _, tt := range []struct {
		generation      int64
		resourceVersion string
		last            lastPublished
		behind          bool
	}{
		{2, "10", lastPublished{}, false},
		{2, "10", lastPublished{generation: 2, resourceVersion: "10"}, false},
		{3, "11", lastPublished{generation: 2, resourceVersion: "10"}, false},
		{1, "11", lastPublished{generation: 2, resourceVersion: "10"}, true},
		{2, "9", lastPublished{generation: 2, resourceVersion: "10"}, true},
		{2, "9", lastPublished{generation: 2, resourceVersion: "ten"}, false},
		{2, "abc", lastPublished{generation: 2, resourceVersion: "10"}, false},
	} {
		p := &unstructured.Unstructured{Object: map[string]any{}}
		p.SetGeneration(tt.generation)
		p.SetResourceVersion(tt.resourceVersion)
		if err := notBehind(p, tt.last); errors.Is(err, errCacheBehind) != tt.behind || (verdict.Of(err) == verdict.Wait) != tt.behind {
			t.Errorf("generation %d, resourceVersion %s after %+v: %v, want behind %v", tt.generation, tt.resourceVersion, tt.last, err, tt.behind)
		}
	}
}

// TestRevisionID: an older revision's request is chained to the latest
// revision's: the same for the same latest request, new for a new one.
func TestRevisionID(t *testing.T) {
	hash := observedHash("uc.req.c.sync.1.u_r", "t", []byte("A"))
	first := chainedID(hash, "latest-1", false)
	if again := chainedID(hash, "latest-1", false); again != first {
		t.Errorf("after the same latest request: %s, want %s", again, first)
	}
	for _, id := range []string{chainedID(hash, "latest-2", false), chainedID(hash, "latest-1", true)} {
		if id == first {
			t.Errorf("after another latest request, or forced: %s, the same as before", id)
		}
		if !sameObservedState(id, first) {
			t.Errorf("%s and %s observed the same, their ids do not say so", id, first)
		}
	}
}
