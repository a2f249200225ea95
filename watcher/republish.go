package watcher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"

	"universalcontroller.dev/uc/schemas/bus"
)

// A parent's last request is followed to its end, and a parent whose
// request failed is asked again, on a schedule that backs off per parent
// across syncs (invariant 8 of the design).
//
// The last line of defence: a request or a reply lost on the bus — a NATS
// server that lost its files, a stream purged, a bug — leaves a parent
// whose latest observation is never applied, and nothing syncs it again
// until it changes. So the watcher remembers the last request it published
// for each parent and, a grace period later (republishGrace), looks for it
// along the pipeline: still in UC_REQUESTS, answered in UC_REPLIES, or
// applied (the parent's fence names it). A request found nowhere was lost,
// or failed: the parent is published again, forced, at a bounded rate
// (republishPerSecond).
//
// Failures back off. A request fails when its hook fails its deliveries
// and it is dead-lettered, or when its reply is rejected. The watcher
// hears it from the dead letter itself (it listens to uc.dlq.>), from a
// customize hook's failure (it takes those replies), and from uc's report
// of the failure on the parent (Synced=False, see ownwrites.go); and finds
// it, when it heard nothing, as it finds a lost request. The parent is
// then asked again — a retry — after a delay that doubles with each
// failure in a row: the k-th retry waits
//
//	min(first · 2^(k-1), maxRetryDelay), less up to retryJitter of it,
//
// after the failure, where first is the wait the hook's delivery policy
// would have made after its last delivery (BackoffDelay · 2^(MaxDeliveries-1),
// up to MaxBackoffDelay: 60 s for the default policy, 0.8 s for 3
// deliveries 200 ms apart), and at least minFirstRetry. So the gaps between
// a failing parent's hook calls go on growing where the delivery policy's
// left off, up to some 17 minutes: the default policy's ten calls in four
// minutes, then 1, 2, 4, 8, 16, 16… minutes apart. A retry is one call: a
// request that is a retry says so (bus.Meta.Failures) and a worker tries
// it once — the backoff spaces the calls, not the delivery policy.
// Meanwhile nothing else asks the hook about the parent: uc's own report
// of the failure does not sync it, and a resync (resyncPeriodSeconds,
// resyncAfterSeconds) is deferred until the retry, which is one. A change
// of the parent, of its children or of its related objects by anyone else
// (a new observed state) starts again at once, with the delivery policy's
// deliveries; so does an apply of the parent's request (the hook recovered,
// or the parent changed so that it works). A hook that recovers is called
// again at the latest when the backoff's current step ends.
const (
	republishGrace     = time.Minute
	minFirstRetry      = time.Second
	maxRetryDelay      = 1000 * time.Second
	retryJitter        = 0.1
	republishPerSecond = 20
)

// lastRequest is the last request the watcher published for a parent.
type lastRequest struct {
	uid            types.UID
	id             string // the request's CloudEvent id
	request, reply string // the subjects of the request and of its reply
	at             time.Time
	// retries counts the requests published since the parent last changed
	// (or was last found applied) because the one before failed, or was
	// lost; first is the delay before the first.
	retries int
	first   time.Duration
	// failed is set once the request is known to have failed (or been
	// lost): the parent's next request, due at retryAt, is a retry. sure
	// says its failure was heard of the request itself (a dead letter),
	// not only seen on the parent (uc's report, which may be of a delivery
	// that is tried again).
	failed, sure bool
	retryAt      time.Time
	// failedAt is when the failure was heard: a look that saw the request
	// on its way before then does not tell that it is tried again.
	failedAt time.Time
	// changedAt is when the parent, its children or its related objects
	// last changed (by anyone but uc): a failure of a request published
	// before is old news.
	changedAt time.Time
	// resyncDeferred: a resync came while the parent waited for its retry.
	resyncDeferred bool
	// onItsWay counts the looks that found the request on its way, in a row.
	onItsWay int
}

// nextRetries is the count of retries of the request published after rec,
// whose parent has that uid.
func (rec *lastRequest) nextRetries(uid types.UID) int {
	switch {
	case rec == nil || rec.uid != uid:
		return 0
	case rec.failed:
		return rec.retries + 1
	}
	return rec.retries
}

// failureBackoff is how long the k-th retry (k ≥ 1) of a parent waits
// after the failure before it: first doubled k-1 times, up to
// maxRetryDelay, less up to retryJitter of it, as r in [0, 1) picks.
func failureBackoff(first time.Duration, k int, r float64) time.Duration {
	d := max(first, minFirstRetry)
	for i := 1; i < k && d < maxRetryDelay; i++ {
		d *= 2
	}
	d = min(d, maxRetryDelay)
	return d - time.Duration(r*retryJitter*float64(d))
}

// republisher publishes again the parents whose last request failed, or
// was lost.
type republisher struct {
	js    jetstream.JetStream
	log   *slog.Logger
	grace time.Duration
	limit *rate.Limiter
	// resync publishes the parent again, forced: a resync.
	resync func(parentKey)
	// firstRetry is the delay before the first retry of a parent whose
	// request for that controller's hook failed (nil: minFirstRetry).
	firstRetry func(controller, hook string) time.Duration
	checks     workqueue.TypedDelayingInterface[parentKey]

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

// due is when the parent's last request is looked for: once its retry is
// due when it failed, else a grace period after it was published — or,
// for a retry, which is expected to fail or not within moments, the
// retry's own delay after it was published.
func (r *republisher) due(rec *lastRequest) time.Time {
	switch {
	case rec.failed:
		return rec.retryAt
	case rec.retries == 0:
		return rec.at.Add(r.grace)
	}
	return rec.at.Add(failureBackoff(rec.first, rec.retries+1, 0))
}

// maxOnItsWayWait bounds the wait before a request found on its way is
// looked for again (onItsWayBackoff).
const maxOnItsWayWait = 8 * time.Minute

// onItsWayBackoff is how long a request found on its way the n-th time in
// a row (n ≥ 1) waits before it is looked for again: first doubled n-1
// times, up to maxOnItsWayWait. Looked for every grace period instead, the
// requests of a burst that waits in the appliers (50,000 parents, a
// quarter of an hour) would be looked for each minute, two stream infos
// each: a cost growing with the square of the burst. A request lost after
// it was found on its way is found lost within maxOnItsWayWait.
func onItsWayBackoff(first time.Duration, n int) time.Duration {
	d := first
	for i := 1; i < n && d < maxOnItsWayWait; i++ {
		d *= 2
	}
	return min(d, maxOnItsWayWait)
}

// keyOf is the key of the parent an event is about.
func keyOf(meta bus.Meta) parentKey {
	return parentKey{Controller: meta.Controller, Resource: meta.Resource, Namespace: meta.Namespace, Name: meta.Name}
}

// retries is the count of retries the parent's next request is: the
// Failures it carries (see bus.Meta).
func (r *republisher) retries(meta bus.Meta) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last[keyOf(meta)].nextRetries(meta.ApplyKey())
}

// published remembers the request with that id as the parent's last, and
// checks on it when due. It counts the retries in a row of the parent's.
func (r *republisher) published(meta bus.Meta, id string) {
	key := keyOf(meta)
	first := minFirstRetry
	if r.firstRetry != nil {
		first = r.firstRetry(meta.Controller, meta.Hook)
	}
	// The fence is kept per ApplyKey: a decorated object's per decorator.
	cur := &lastRequest{uid: meta.ApplyKey(), id: id, request: meta.RequestSubject(), reply: meta.ReplySubject(), at: time.Now(), first: first}
	r.mu.Lock()
	prev := r.last[key]
	if prev != nil && prev.id == id {
		r.mu.Unlock()
		return // a duplicate: its check is due already
	}
	cur.retries = prev.nextRetries(cur.uid)
	r.last[key] = cur
	r.mu.Unlock()
	r.checks.AddAfter(key, time.Until(r.due(cur)))
}

// failed records that the parent's request of that id (any, if id is
// empty: seen in uc's report on the parent) failed at that time: its retry
// is due after its backoff. A failure of a request published before the
// parent last changed is old news, and a failure heard twice counts once —
// but a dead letter, the request's last word, counts from when it came,
// over a report seen before it (of a first delivery that failed).
func (r *republisher) failed(key parentKey, id string, at time.Time) {
	r.mu.Lock()
	rec := r.last[key]
	if rec == nil || id != "" && rec.id != id || rec.changedAt.After(rec.at) || rec.failed && (rec.sure || id == "") {
		r.mu.Unlock()
		return
	}
	rec.failed, rec.sure, rec.failedAt = true, id != "", at
	rec.retryAt = at.Add(failureBackoff(rec.first, rec.retries+1, rand.Float64()))
	retryAt, k := rec.retryAt, rec.retries+1
	r.mu.Unlock()
	r.log.Debug("the last request of a parent failed; retrying it later", "controller", key.Controller, "parent", key.String(),
		"request", rec.id, "retry", k, "in", time.Until(retryAt).Round(time.Millisecond))
	r.checks.AddAfter(key, time.Until(retryAt))
}

// changed records that the parent, its children or its related objects
// changed, by anyone but uc: a new observed state, which the hook is asked
// about at once. Its backoff starts again.
func (r *republisher) changed(key parentKey, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if rec := r.last[key]; rec != nil {
		rec.changedAt, rec.retries, rec.failed, rec.sure, rec.retryAt, rec.failedAt, rec.resyncDeferred = at, 0, false, false, time.Time{}, time.Time{}, false
	}
}

// awaitingRetry tells whether the parent waits for the retry of its failed
// request: no request is published for it meanwhile. A resync (resync)
// deferred is made once the wait ends without a retry.
func (r *republisher) awaitingRetry(key parentKey, resync bool, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec := r.last[key]
	if rec == nil || !rec.failed || !now.Before(rec.retryAt) {
		return false
	}
	rec.resyncDeferred = rec.resyncDeferred || resync
	return true
}

// forget forgets a parent that needs no request: it is gone, or no longer
// the controller's.
func (r *republisher) forget(key parentKey) {
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

// check looks for the parent's last request once it is due, and
// publishes the parent again when the request is nowhere: it failed, or
// was lost.
func (r *republisher) check(ctx context.Context, key parentKey) {
	r.mu.Lock()
	rec := r.last[key]
	var due time.Duration
	var since time.Time // what the look must see: after the request and any failure heard
	if rec != nil {
		due, since = time.Until(r.due(rec)), rec.at
		if rec.failed {
			since = later(since, rec.failedAt)
		}
	}
	r.mu.Unlock()
	switch {
	case rec == nil:
		return
	case due > 0: // a newer request was published since, or its retry waits
		r.checks.AddAfter(key, due)
		return
	}
	log := r.log.With("controller", key.Controller, "parent", key.String(), "uid", rec.uid, "request", rec.id)
	where, seen, err := r.find(ctx, rec, since)
	switch {
	case err != nil:
		log.Warn("look for the last request of a parent; will retry", "err", err)
		r.checks.AddAfter(key, r.grace)
		return
	case where == applied:
		r.mu.Lock()
		current := r.last[key] == rec
		if current {
			delete(r.last, key)
		}
		r.mu.Unlock()
		if current && rec.resyncDeferred {
			r.resync(key)
		}
		return
	case where != "":
		// Still on its way: a failure heard before was not its last word
		// (its first delivery failed, and it is tried again). A failure
		// heard since the look saw it has its retry queued.
		r.mu.Lock()
		if rec.failed && rec.failedAt.After(seen) {
			r.mu.Unlock()
			return
		}
		rec.failed, rec.sure, rec.retryAt, rec.failedAt = false, false, time.Time{}, time.Time{}
		rec.onItsWay++
		again := onItsWayBackoff(r.due(rec).Sub(rec.at), rec.onItsWay)
		r.mu.Unlock()
		r.checks.AddAfter(key, again)
		return
	}
	if err := r.limit.Wait(ctx); err != nil {
		return
	}
	r.mu.Lock()
	if r.last[key] != rec {
		r.mu.Unlock()
		r.checks.AddAfter(key, 0) // a newer request was published meanwhile
		return
	}
	heard := rec.failed
	now := time.Now()
	rec.failed, rec.sure, rec.retryAt, rec.failedAt, rec.resyncDeferred = true, true, now, now, false
	published, k := time.Since(rec.at).Round(time.Second), rec.retries+1
	r.mu.Unlock()
	if heard {
		log.Info("the last request of a parent failed; asking again", "retry", k)
	} else {
		log.Warn("the last request of a parent is neither on the bus nor applied; publishing the parent again", "published", published, "retry", k)
	}
	r.resync(key)
	// The retry's publish checks on it in time; this, if it publishes nothing.
	r.checks.AddAfter(key, r.grace)
}

// later is the later of two times.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// applied is where find finds a request that was applied.
const applied = "applied"

// find looks for a request along the pipeline and says where it is, or ""
// when it is lost, and when it was seen there: after since. The cheap
// looks come first, each of which can only find it: in a snapshot of the
// streams' subjects taken after since (backlog), then in its parent's
// fence. A request neither finds is looked for once more, in the order it
// moves along the pipeline — its request, its reply, the fence — so that
// it cannot move past the looks meanwhile: lost is said of a request that
// was nowhere at once.
func (r *republisher) find(ctx context.Context, rec *lastRequest, since time.Time) (string, time.Time, error) {
	b, err := r.open(ctx)
	if err != nil {
		return "", time.Time{}, err
	}
	for _, at := range b.streams(rec) {
		seen, err := at.backlog.holds(ctx, at.stream, at.subject, since)
		if err != nil {
			return "", time.Time{}, err
		}
		if !seen.IsZero() {
			return "in " + at.stream.CachedInfo().Config.Name, seen, nil
		}
	}
	now := time.Now()
	switch ok, err := b.applied(ctx, rec); {
	case err != nil:
		return "", now, err
	case ok:
		return applied, now, nil
	}
	now = time.Now()
	for _, at := range b.streams(rec) {
		info, err := at.stream.Info(ctx, jetstream.WithSubjectFilter(at.subject))
		if err != nil {
			return "", now, fmt.Errorf("stream %s: %w", at.stream.CachedInfo().Config.Name, err)
		}
		if info.State.Subjects[at.subject] > 0 {
			return "in " + info.Config.Name, now, nil
		}
	}
	if ok, err := b.applied(ctx, rec); !ok || err != nil {
		return "", now, err
	}
	return applied, now, nil
}

// pipeline is where find looks. It is used by the republisher's one
// goroutine (run).
type pipeline struct {
	requests, replies    jetstream.Stream
	requestLog, replyLog backlog
	fence                jetstream.KeyValue
}

// streamLook is where a request's message waits in one stream.
type streamLook struct {
	stream  jetstream.Stream
	subject string
	backlog *backlog
}

// streams are where rec's messages wait, in the order they move.
func (b *pipeline) streams(rec *lastRequest) []streamLook {
	return []streamLook{{b.requests, rec.request, &b.requestLog}, {b.replies, rec.reply, &b.replyLog}}
}

// applied tells whether rec's parent's fence names rec: it was applied.
func (b *pipeline) applied(ctx context.Context, rec *lastRequest) (bool, error) {
	e, err := b.fence.Get(ctx, string(rec.uid))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read the fence: %w", err)
	}
	fence, err := bus.ParseFence(e.Value())
	return err == nil && fence.Request == rec.id, err
}

// backlogMaxAge is how long a snapshot of a stream's subjects answers
// looks before it is taken again.
const backlogMaxAge = 10 * time.Second

// backlog is a snapshot of a stream's subjects that held messages, taken
// at a time: one stream info for all the looks due within backlogMaxAge,
// where one per look made the looks of a burst waiting in the appliers
// (50,000 parents, two stream infos each, again and again) a tenth of uc's
// CPU and of the server's.
type backlog struct {
	at       time.Time
	subjects map[string]uint64
}

// holds tells when the stream was seen holding a message on subject
// after since (zero: it was not, or the snapshot is older than since), as
// a snapshot at most backlogMaxAge old says. A snapshot older than the
// request would speak of an older message of the subject; one older than
// a failure heard, of a delivery before it. A new snapshot is taken only
// once the last is backlogMaxAge old, so that a burst of failures, each
// heard after the last snapshot, does not take one each.
func (l *backlog) holds(ctx context.Context, s jetstream.Stream, subject string, since time.Time) (time.Time, error) {
	if now := time.Now(); now.Sub(l.at) > backlogMaxAge {
		info, err := s.Info(ctx, jetstream.WithSubjectFilter(s.CachedInfo().Config.Subjects[0]))
		if err != nil {
			return time.Time{}, fmt.Errorf("stream %s: %w", s.CachedInfo().Config.Name, err)
		}
		l.at, l.subjects = now, info.State.Subjects
	}
	if !l.at.After(since) || l.subjects[subject] == 0 {
		return time.Time{}, nil
	}
	return l.at, nil
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
