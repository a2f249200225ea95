package applier

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/types"

	"universalcontroller.dev/uc/core"
	"universalcontroller.dev/uc/internal/topology"
	"universalcontroller.dev/uc/schemas/bus"
)

// kvFence keeps the per-parent fence in a JetStream key-value bucket, so it
// holds across restarts and across applier replicas.
type kvFence struct{ kv jetstream.KeyValue }

func newKVFence(ctx context.Context, js jetstream.JetStream, replicas int) (*kvFence, error) {
	kv, err := topology.EnsureBucket(ctx, js, topology.Fence, topology.Options{Replicas: replicas})
	if err != nil {
		return nil, err
	}
	return &kvFence{kv}, nil
}

// fenceTimeout bounds each read or write of a fence within an apply's
// deadline: the bus answers within milliseconds, or never (a NATS server
// that restarted has lost the requests in flight), and a fence that waited
// for the apply's whole two minutes would hold its parent, and a worker.
const fenceTimeout = 5 * time.Second

// fenceEntry is a parent's fence as this replica last read or wrote it:
// the observation of the reply applied last, and the revision of its key
// in the bucket (0: none).
type fenceEntry struct {
	observation int64
	revision    uint64
}

func (f *kvFence) last(ctx context.Context, uid types.UID) (fenceEntry, error) {
	ctx, cancel := context.WithTimeout(ctx, fenceTimeout)
	defer cancel()
	e, err := f.kv.Get(ctx, string(uid))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return fenceEntry{}, nil
	}
	if err != nil {
		return fenceEntry{}, fmt.Errorf("read fence of %s: %w", uid, err)
	}
	fence, err := bus.ParseFence(e.Value())
	return fenceEntry{fence.Observation, e.Revision()}, err
}

// errFenceMoved is a fence that another apply advanced past the reply
// being applied: a newer observation was applied meanwhile.
var errFenceMoved = errors.New("the fence moved past this reply: a newer observation was applied")

// advance moves the parent's fence from after (the entry this replica
// knows) to fence, by compare-and-set on the key's revision, never a blind
// put: a replica that lost its partition while it was paused cannot move
// a fence back. When the key changed since after, it is read again: a
// fence past fence's observation fails with errFenceMoved; one not past it
// (a put this replica did not see answered) is moved from.
func (f *kvFence) advance(ctx context.Context, uid types.UID, fence bus.Fence, after fenceEntry) (fenceEntry, error) {
	ctx, cancel := context.WithTimeout(ctx, fenceTimeout)
	defer cancel()
	for range 3 {
		var rev uint64
		var err error
		if after.revision == 0 {
			rev, err = f.kv.Create(ctx, string(uid), fence.Value())
		} else {
			rev, err = f.kv.Update(ctx, string(uid), fence.Value(), after.revision)
		}
		if err == nil {
			return fenceEntry{fence.Observation, rev}, nil
		}
		cur, readErr := f.last(ctx, uid)
		switch {
		case readErr != nil:
			return fenceEntry{}, fmt.Errorf("advance fence of %s: %w", uid, err)
		case cur.revision == after.revision:
			return fenceEntry{}, fmt.Errorf("advance fence of %s: %w", uid, err) // not a race: the bus failed
		case cur.observation > fence.Observation:
			return cur, fmt.Errorf("advance fence of %s to %d: %w (%d)", uid, fence.Observation, errFenceMoved, cur.observation)
		}
		after = cur
	}
	return fenceEntry{}, fmt.Errorf("advance fence of %s: the key keeps changing", uid)
}

func (f *kvFence) forget(ctx context.Context, uid types.UID) error {
	ctx, cancel := context.WithTimeout(ctx, fenceTimeout)
	defer cancel()
	if err := f.kv.Purge(ctx, string(uid)); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("forget fence of %s: %w", uid, err)
	}
	return nil
}

// knownParents is what the reconciler knows of the parents of one
// partition this replica holds, from the applies since it took the
// partition: a partition taken again starts knowing none.
type knownParents struct {
	mu sync.Mutex
	// fenced caches the fence of the partition's parents, as this replica
	// last read or wrote it. It only saves a read: the fence is advanced by
	// compare-and-set on the revision it holds.
	fenced map[types.UID]fenceEntry
	// deferred holds the parents whose last apply left their status to the
	// next one (see deferStatus).
	deferred map[types.UID]bool
	// rolling holds the progress of the partition's parents whose
	// children are not all on their latest revision.
	rolling map[types.UID]rolloutProgress
	// recreated counts, per parent, the re-creations in a row of its
	// children for one desired state (recreateloop.go).
	recreated map[types.UID]map[core.ChildID]recreation
}

func newKnownParents() *knownParents {
	return &knownParents{fenced: map[types.UID]fenceEntry{}, deferred: map[types.UID]bool{}, rolling: map[types.UID]rolloutProgress{},
		recreated: map[types.UID]map[core.ChildID]recreation{}}
}

// lastApplied is the fence of the parent: what the partition's parents
// know or, the first time, what the bucket holds.
func (r *reconciler) lastApplied(ctx context.Context, parents *knownParents, uid types.UID) (fenceEntry, error) {
	parents.mu.Lock()
	last, ok := parents.fenced[uid]
	parents.mu.Unlock()
	if ok {
		return last, nil
	}
	last, err := r.fence.last(ctx, uid)
	if err != nil {
		return fenceEntry{}, err
	}
	parents.remember(uid, last)
	return last, nil
}

// advanceFence records that the reply of the parent's latest revision with
// that meta was applied.
func (r *reconciler) advanceFence(ctx context.Context, parents *knownParents, m bus.Meta) error {
	key := m.ApplyKey()
	last, err := r.lastApplied(ctx, parents, key)
	if err != nil {
		return err
	}
	if err := mayWrite(ctx); err != nil {
		return err
	}
	fence := bus.Fence{Observation: m.Observation, Request: m.RequestID, Generation: m.Generation, ResourceVersion: m.ResourceVersion}
	cur, err := r.fence.advance(ctx, key, fence, last)
	if err != nil {
		parents.forget(key) // read it again next time
		return err
	}
	parents.remember(key, cur)
	r.observer.Applied(m)
	return nil
}

func (k *knownParents) remember(uid types.UID, fence fenceEntry) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.fenced[uid] = fence
}

func (k *knownParents) forget(uid types.UID) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.fenced, uid)
	delete(k.deferred, uid)
	delete(k.rolling, uid)
	delete(k.recreated, uid)
}
