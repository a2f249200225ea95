package watcher

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"universalcontroller.dev/uc/internal/verdict"
	"universalcontroller.dev/uc/schemas/bus"
)

// A request's id decides whether the bus takes it: JetStream drops a
// message whose id it took in the last two minutes (UC_REQUESTS' duplicate
// window). That must drop a request of what was already asked — a watcher
// that takes over publishes every parent again, a sync finds nothing new —
// and nothing else. An id made of what the request observed alone does
// not: a parent's observed state can come back to an earlier one (a child
// or an attachment deleted gives the state from before it was created), and
// its request would be dropped as the earlier one's duplicate.
//
// So a request's id has two parts: a hash of its subject, type and what it
// observed, and a hash of the id of the parent's request published before
// it (its predecessor): "<observed>-<predecessor>". A request that observed
// what its predecessor observed takes the predecessor's id and is dropped;
// any other gets an id the bus has not seen, even for an earlier state:
// once a new id is chained to a predecessor, the new one is the next
// predecessor. The watcher
// remembers each parent's last request; for a parent it has not published
// for yet (it has just started, or taken over) the predecessor is the
// request whose reply was applied last, which the parent's fence names: a
// watcher that takes over gives an unchanged parent the id its predecessor
// gave it, and the bus drops it. One more case is new: a state that its
// predecessor observed too, but after the predecessor was applied — what
// the apply made was undone before the watcher saw it (a child created,
// then deleted at once). A request forced (a resync) gets a random third
// part.

// lastPublished is what the watcher last published for a parent, or, for a
// parent it has not published for yet, what its fence says was applied.
type lastPublished struct {
	key             types.UID // the parent's bus.Address.ApplyKey
	id              string    // the request's id; empty if none is known
	generation      int64
	resourceVersion string
	observation     int64
	// applied: the request was applied when the watcher published it (it
	// published the fence's request again, or this is the fence's).
	applied bool
	// hook and at say which request the watcher published, and when it
	// first published a request of that id: zero for the fence's.
	hook string
	at   time.Time
}

// requestChain remembers the last request published for each parent, the
// latest revision's (a rolling controller's older revisions' requests are
// chained to it).
type requestChain struct {
	js jetstream.JetStream

	mu    sync.Mutex
	last  map[parentKey]lastPublished
	fence jetstream.KeyValue // opened on first use
}

func newRequestChain(js jetstream.JetStream) *requestChain {
	return &requestChain{js: js, last: map[parentKey]lastPublished{}}
}

// previous is the parent's last request: the one the watcher published
// last, or the one whose reply its fence says was applied.
func (c *requestChain) previous(ctx context.Context, key parentKey, meta bus.Meta) (lastPublished, error) {
	applyKey := meta.ApplyKey()
	c.mu.Lock()
	last, ok := c.last[key]
	c.mu.Unlock()
	if ok && last.key == applyKey {
		return last, nil
	}
	fence, err := c.fenceOf(ctx, applyKey)
	if err != nil {
		return lastPublished{}, err
	}
	return lastPublished{key: applyKey, id: fence.Request, generation: fence.Generation,
		resourceVersion: fence.ResourceVersion, observation: fence.Observation, applied: true}, nil
}

// fenceOf reads the parent's fence; a parent never applied, or a bus whose
// appliers have not made the bucket yet, has none.
func (c *requestChain) fenceOf(ctx context.Context, key types.UID) (bus.Fence, error) {
	ctx, cancel := context.WithTimeout(ctx, busTimeout)
	defer cancel()
	c.mu.Lock()
	kv := c.fence
	c.mu.Unlock()
	if kv == nil {
		var err error
		kv, err = c.js.KeyValue(ctx, bus.FenceBucket)
		if errors.Is(err, jetstream.ErrBucketNotFound) {
			return bus.Fence{}, nil
		}
		if err != nil {
			return bus.Fence{}, fmt.Errorf("bucket %s: %w", bus.FenceBucket, err)
		}
		c.mu.Lock()
		c.fence = kv
		c.mu.Unlock()
	}
	e, err := kv.Get(ctx, string(key))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return bus.Fence{}, nil
	}
	if err != nil {
		return bus.Fence{}, fmt.Errorf("read the fence of %s: %w", key, err)
	}
	return bus.ParseFence(e.Value())
}

// next is the id of the parent's request whose observed state hashes to
// hash, published after last (see above).
func (c *requestChain) next(ctx context.Context, last lastPublished, hash string, forced bool) (string, error) {
	if forced || last.id == "" || !sameObservedState(last.id, hash) {
		return chainedID(hash, last.id, forced), nil
	}
	if last.applied {
		return last.id, nil
	}
	fence, err := c.fenceOf(ctx, last.key)
	if err != nil {
		return "", err
	}
	if fence.Request == last.id { // applied since it was published
		return chainedID(hash, last.id, false), nil
	}
	return last.id, nil
}

// published remembers the request with that id, published after last, as
// the parent's last.
func (c *requestChain) published(key parentKey, meta bus.Meta, id string, last lastPublished) {
	c.mu.Lock()
	defer c.mu.Unlock()
	at := time.Now()
	if prev, ok := c.last[key]; ok && prev.id == id {
		at = prev.at // the bus dropped this one as a duplicate
	}
	c.last[key] = lastPublished{key: meta.ApplyKey(), id: id, generation: meta.Generation,
		resourceVersion: meta.ResourceVersion, observation: meta.Observation, applied: id == last.id && last.applied,
		hook: meta.Hook, at: at}
}

// lastOf is the last request the watcher published for the parent, if it
// published one since it became active.
func (c *requestChain) lastOf(key parentKey) (lastPublished, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	last, ok := c.last[key]
	return last, ok
}

// forget forgets a parent that needs no request.
func (c *requestChain) forget(key parentKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.last, key)
}

// errCacheBehind is a parent whose cached copy is older than the one its
// last request observed: the cache of a watcher that just took over, still
// behind its predecessor's. It waits (verdict.Wait), no failure: the cache
// catches up within moments, and the parent is synced again a little later.
var errCacheBehind = verdict.Wait.Mark(errors.New("the cache holds an older parent than the one last published or applied"))

// notBehind fails with errCacheBehind when parent is older than the one
// last observed: a smaller generation or, where both are the integers
// etcd gives, a smaller resourceVersion.
func notBehind(parent *unstructured.Unstructured, last lastPublished) error {
	if parent.GetGeneration() < last.generation {
		return fmt.Errorf("%w: generation %d, %d last", errCacheBehind, parent.GetGeneration(), last.generation)
	}
	cur, err1 := strconv.ParseUint(parent.GetResourceVersion(), 10, 64)
	prev, err2 := strconv.ParseUint(last.resourceVersion, 10, 64)
	if err1 == nil && err2 == nil && cur < prev {
		return fmt.Errorf("%w: resourceVersion %d, %d last", errCacheBehind, cur, prev)
	}
	return nil
}

// chainedID is the id of an event whose observed state hashes to hash,
// chained to the id of the request before it, with a random part when
// forced.
func chainedID(hash, previous string, forced bool) string {
	before := sha256.Sum256([]byte(previous))
	id := hash + "-" + hex.EncodeToString(before[:4])
	if forced {
		id += "-" + uuid.NewString()[:8]
	}
	return id
}

// observedHash hashes what an event says: its subject, type and what it
// observed.
func observedHash(subject, typ string, observed []byte) string {
	h := sha256.New()
	for _, part := range [][]byte{[]byte(subject), []byte(typ), observed} {
		h.Write(part)
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// sameObservedState tells two event ids whose observed parts are the same.
func sameObservedState(a, b string) bool {
	hashA, _, _ := strings.Cut(a, "-")
	hashB, _, _ := strings.Cut(b, "-")
	return hashA == hashB
}
