package watcher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"

	"universalcontroller.dev/uc/schemas/bus"
)

// The last line of defence. A request or a reply lost on the bus — a NATS
// server that lost its files, a stream purged, a bug — leaves a parent whose
// latest observation is never applied, and nothing syncs it again until it
// changes. So the watcher remembers the last request it published for each
// parent and, a grace period later, looks for it along the pipeline: still
// in UC_REQUESTS, answered in UC_REPLIES, or applied (the parent's fence
// names it). A request found nowhere was lost: the parent is published
// again, forced, at a bounded rate. A parent whose requests are never
// applied (its hook's replies are rejected) waits twice as long each time,
// up to maxRepublishGrace.
const (
	republishGrace     = time.Minute
	maxRepublishGrace  = 16 * time.Minute
	republishPerSecond = 20
)

// lastRequest is the last request the watcher published for a parent.
type lastRequest struct {
	uid            types.UID
	id             string // the request's CloudEvent id
	request, reply string // the subjects of the request and of its reply
	at             time.Time
	// republished counts the times the parent was published again since
	// it was last found applied.
	republished int
}

// republisher publishes again the parents whose last request was lost.
type republisher struct {
	js    jetstream.JetStream
	log   *slog.Logger
	grace time.Duration
	limit *rate.Limiter
	// resync publishes the parent again, forced.
	resync func(parentKey)
	checks workqueue.TypedDelayingInterface[parentKey]

	mu   sync.Mutex
	last map[parentKey]*lastRequest
	bus  *pipeline // opened on first use
}

func newRepublisher(js jetstream.JetStream, log *slog.Logger, resync func(parentKey)) *republisher {
	return &republisher{
		js: js, log: log, grace: republishGrace, resync: resync,
		limit:  rate.NewLimiter(republishPerSecond, republishPerSecond),
		checks: workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[parentKey]{Name: "republish"}),
		last:   map[parentKey]*lastRequest{},
	}
}

// wait is how long a parent published again n times waits for its request
// to be applied.
func (r *republisher) wait(n int) time.Duration {
	return min(r.grace<<min(n, 10), maxRepublishGrace)
}

// published remembers the request with that id as the parent's last, and
// checks on it after the grace period. A request of the same observed
// state as the one before (a forced one) keeps its count of re-publishes.
func (r *republisher) published(meta bus.Meta, id string) {
	key := parentKey{Controller: meta.Controller, Resource: meta.Resource, Namespace: meta.Namespace, Name: meta.Name}
	// The fence is kept per ApplyKey: a decorated object's per decorator.
	cur := &lastRequest{uid: meta.ApplyKey(), id: id, request: meta.RequestSubject(), reply: meta.ReplySubject(), at: time.Now()}
	r.mu.Lock()
	prev := r.last[key]
	if prev != nil && prev.id == id {
		r.mu.Unlock()
		return // a duplicate: its check is due already
	}
	if prev != nil && prev.uid == cur.uid && sameObservedState(prev.id, id) {
		cur.republished = prev.republished
	}
	r.last[key] = cur
	r.mu.Unlock()
	r.checks.AddAfter(key, r.wait(cur.republished))
}

// forget forgets a parent that needs no request: it is gone, or no longer
// the controller's.
func (r *republisher) forget(key parentKey) {
	key.Resync = false
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.last, key)
}

// run checks the parents' last requests as they fall due, until ctx ends.
func (r *republisher) run(ctx context.Context) {
	go func() {
		<-ctx.Done()
		r.checks.ShutDown()
	}()
	for {
		key, quit := r.checks.Get()
		if quit {
			return
		}
		r.check(ctx, key)
		r.checks.Done(key)
	}
}

// check looks for the parent's last request once its wait is over, and
// publishes the parent again when the request is nowhere.
func (r *republisher) check(ctx context.Context, key parentKey) {
	r.mu.Lock()
	rec := r.last[key]
	var due time.Duration
	if rec != nil {
		due = r.wait(rec.republished) - time.Since(rec.at)
	}
	r.mu.Unlock()
	switch {
	case rec == nil:
		return
	case due > 0: // a newer request was published since
		r.checks.AddAfter(key, due)
		return
	}
	log := r.log.With("controller", key.Controller, "parent", key.String(), "uid", rec.uid, "request", rec.id)
	where, err := r.find(ctx, rec)
	switch {
	case err != nil:
		log.Warn("look for the last request of a parent; will retry", "err", err)
		r.checks.AddAfter(key, r.grace)
		return
	case where == applied:
		r.mu.Lock()
		if r.last[key] == rec {
			delete(r.last, key)
		}
		r.mu.Unlock()
		return
	case where != "":
		r.checks.AddAfter(key, r.grace)
		return
	}
	if err := r.limit.Wait(ctx); err != nil {
		return
	}
	r.mu.Lock()
	log = log.With("published", time.Since(rec.at).Round(time.Second))
	rec.republished++
	rec.at = time.Now()
	n := rec.republished
	r.mu.Unlock()
	log.Warn("the last request of a parent is neither on the bus nor applied; publishing the parent again", "republished", n)
	key.Resync = true
	r.resync(key)
	key.Resync = false
	r.checks.AddAfter(key, r.wait(n))
}

// applied is where find finds a request that was applied.
const applied = "applied"

// find looks for a request along the pipeline, in the order it moves along
// it — its request, its reply, the fence — so that it cannot move past a
// look meanwhile. It says where the request is, or "" when it is lost.
func (r *republisher) find(ctx context.Context, rec *lastRequest) (string, error) {
	b, err := r.open(ctx)
	if err != nil {
		return "", err
	}
	for _, at := range []struct {
		stream  jetstream.Stream
		subject string
	}{{b.requests, rec.request}, {b.replies, rec.reply}} {
		info, err := at.stream.Info(ctx, jetstream.WithSubjectFilter(at.subject))
		if err != nil {
			return "", fmt.Errorf("stream %s: %w", at.stream.CachedInfo().Config.Name, err)
		}
		if info.State.Subjects[at.subject] > 0 {
			return "in " + info.Config.Name, nil
		}
	}
	e, err := b.fence.Get(ctx, string(rec.uid))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read the fence: %w", err)
	}
	fence, err := bus.ParseFence(e.Value())
	if err != nil || fence.Request != rec.id {
		return "", err
	}
	return applied, nil
}

// pipeline is where find looks.
type pipeline struct {
	requests, replies jetstream.Stream
	fence             jetstream.KeyValue
}

// open opens the pipeline's streams and the fence bucket (the appliers
// create it) the first time.
func (r *republisher) open(ctx context.Context) (*pipeline, error) {
	r.mu.Lock()
	b := r.bus
	r.mu.Unlock()
	if b != nil {
		return b, nil
	}
	b = &pipeline{}
	var err error
	if b.requests, err = r.js.Stream(ctx, bus.RequestStream); err != nil {
		return nil, fmt.Errorf("stream %s: %w", bus.RequestStream, err)
	}
	if b.replies, err = r.js.Stream(ctx, bus.ReplyStream); err != nil {
		return nil, fmt.Errorf("stream %s: %w", bus.ReplyStream, err)
	}
	if b.fence, err = r.js.KeyValue(ctx, bus.FenceBucket); err != nil {
		return nil, fmt.Errorf("bucket %s: %w", bus.FenceBucket, err)
	}
	r.mu.Lock()
	r.bus = b
	r.mu.Unlock()
	return b, nil
}
