package applier

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/types"

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

func (f *kvFence) last(ctx context.Context, uid types.UID) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, fenceTimeout)
	defer cancel()
	e, err := f.kv.Get(ctx, string(uid))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read fence of %s: %w", uid, err)
	}
	fence, err := bus.ParseFence(e.Value())
	return fence.Observation, err
}

func (f *kvFence) advance(ctx context.Context, uid types.UID, fence bus.Fence) error {
	ctx, cancel := context.WithTimeout(ctx, fenceTimeout)
	defer cancel()
	if _, err := f.kv.Put(ctx, string(uid), fence.Value()); err != nil {
		return fmt.Errorf("advance fence of %s: %w", uid, err)
	}
	return nil
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
	// fenced caches the fence of the partition's parents: while a replica
	// holds a partition, it alone advances their fences, so what it read
	// or wrote since it took the partition is current.
	fenced map[types.UID]int64
	// deferred holds the parents whose last apply left their status to the
	// next one (see deferStatus).
	deferred map[types.UID]bool
	// rolling holds the progress of the partition's parents whose
	// children are not all on their latest revision.
	rolling map[types.UID]rolloutProgress
}

func newKnownParents() *knownParents {
	return &knownParents{fenced: map[types.UID]int64{}, deferred: map[types.UID]bool{}, rolling: map[types.UID]rolloutProgress{}}
}

// lastApplied is the observation of the last reply applied to the parent,
// from what the partition's parents know or, the first time, from the
// bucket.
func (r *reconciler) lastApplied(ctx context.Context, parents *knownParents, uid types.UID) (int64, error) {
	parents.mu.Lock()
	last, ok := parents.fenced[uid]
	parents.mu.Unlock()
	if ok {
		return last, nil
	}
	last, err := r.fence.last(ctx, uid)
	if err != nil {
		return 0, err
	}
	parents.remember(uid, last)
	return last, nil
}

// advanceFence records that the reply of the parent's latest revision with
// that meta was applied.
func (r *reconciler) advanceFence(ctx context.Context, parents *knownParents, m bus.Meta) error {
	key := m.ApplyKey()
	fence := bus.Fence{Observation: m.Observation, Request: m.RequestID, Generation: m.Generation, ResourceVersion: m.ResourceVersion}
	if err := r.fence.advance(ctx, key, fence); err != nil {
		parents.forget(key) // the bucket may or may not hold it: read it again
		return err
	}
	parents.remember(key, m.Observation)
	r.observer.Applied(m)
	return nil
}

func (k *knownParents) remember(uid types.UID, observation int64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.fenced[uid] = observation
}

func (k *knownParents) forget(uid types.UID) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.fenced, uid)
	delete(k.deferred, uid)
	delete(k.rolling, uid)
}
