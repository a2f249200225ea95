package applier

import (
	"context"
	"errors"
	"fmt"
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

// lastApplied is the observation of the last reply applied to the parent,
// from the partition's cache or, the first time, from the bucket.
func (a *Applier) lastApplied(ctx context.Context, p *partition, uid types.UID) (int64, error) {
	p.mu.Lock()
	last, ok := p.fenced[uid]
	p.mu.Unlock()
	if ok {
		return last, nil
	}
	last, err := a.fence.last(ctx, uid)
	if err != nil {
		return 0, err
	}
	p.remember(uid, last)
	return last, nil
}

// advanceFence records that the reply of the parent's latest revision with
// that meta was applied.
func (a *Applier) advanceFence(ctx context.Context, p *partition, m bus.Meta) error {
	key := m.ApplyKey()
	fence := bus.Fence{Observation: m.Observation, Request: m.RequestID, Generation: m.Generation, ResourceVersion: m.ResourceVersion}
	if err := a.fence.advance(ctx, key, fence); err != nil {
		p.forget(key) // the bucket may or may not hold it: read it again
		return err
	}
	p.remember(key, m.Observation)
	a.observer().Applied(m)
	return nil
}

func (p *partition) remember(uid types.UID, observation int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fenced[uid] = observation
}

func (p *partition) forget(uid types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.fenced, uid)
	delete(p.deferred, uid)
	delete(p.rolling, uid)
}
