package watcher

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"universalcontroller.dev/uc/core"
	"universalcontroller.dev/uc/internal/revision"
	"universalcontroller.dev/uc/internal/tracing"
	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// sync publishes the hook request of one parent with its current observed
// state. It is idempotent: syncing twice publishes the same state twice, and
// the request stream keeps only the latest request per parent. A resync
// publishes its requests forced (see requestChain).
func (w *Watcher) sync(ctx context.Context, key parentKey, resync bool) error {
	ctl, ok := w.reg.Get(key.Controller)
	if !ok {
		w.forget(key)
		return nil
	}
	if w.awaitsWrites(key, resync) {
		return nil
	}
	if w.republish.awaitingRetry(key, resync, time.Now()) {
		// Its last request failed: the next is its retry, when due.
		w.log.Debug("sync deferred until the retry of a failed request", "controller", key.Controller, "parent", key.String(), "resync", resync)
		return nil
	}
	return w.kindOf(ctl).sync(ctx, ctl, key, resync)
}

// syncParent publishes the request of a UniversalController's parent, and
// of its shadow and its older revisions.
func (w *Watcher) syncParent(ctx context.Context, ctl *core.Controller, key parentKey, resync bool) error {
	b, err := w.build(ctx, ctl, key)
	switch {
	case err != nil:
		return err
	case b == nil:
		w.forget(key)
		return nil
	case b.failure != nil:
		// Nothing to ask the hook: report the problem on the parent.
		return w.publish(ctx, b.meta, bus.FailureType(b.meta.Hook), b.meta.ReplySubject(), *b.failure, "")
	case b.req == nil:
		// Without a customize reply yet, the sync follows it.
		return w.askCustomize(ctx, ctl, b.parent, resync)
	}
	id, err := w.publishRequest(ctx, key, resync, &b.meta, b.parent, b.req, observed(ctl, b.req))
	if err != nil {
		return err
	}
	if ctl.Shadow() != nil && b.meta.Hook == hooks.Sync {
		// A copy for the sync hook's shadow (see bus.ShadowRequestID).
		m := b.meta
		m.Hook, m.Revisions = hooks.SyncShadow, nil
		if err := w.publish(ctx, m, bus.RequestType(m.Hook), m.RequestSubject(), b.req, bus.ShadowRequestID(id)); err != nil {
			return err
		}
	}
	// One more request per older revision that children are still on, with
	// the parent as it was at that revision: the applier keeps those
	// children as that revision's reply wants them until they roll. Their
	// ids are chained to the latest revision's.
	for _, rev := range b.revs {
		m := b.meta
		m.Revision = rev.hash
		req := core.NewSyncRequest(ctl, rev.parent, b.claimed, b.req.Related, ctl.HookVersion(m.Hook), b.req.Finalizing)
		typ, subject := bus.RequestType(m.Hook), m.RequestSubject()
		if err := w.publish(ctx, m, typ, subject, req, chainedID(observedHash(subject, typ, observed(ctl, req)), id, resync)); err != nil {
			return err
		}
	}
	w.resyncLater(ctl, key)
	return nil
}

// built is a parent's sync or finalize request as the watcher builds it
// from its caches, or what the parent needs instead of one.
type built struct {
	parent *unstructured.Unstructured
	meta   bus.Meta
	// req is the request: nil when failure is set, or when the parent's
	// sync waits for its customize reply.
	req     *hooks.SyncRequest
	claimed [][]*unstructured.Unstructured
	// revs are the older revisions children are still on (controllers
	// that roll their children out).
	revs []olderRevision
	// failure is the problem reported on the parent instead of asking its
	// hook.
	failure *bus.Failure
}

// build builds the parent's request from the caches, and publishes
// nothing. It returns nil when the parent needs no request: it is gone,
// no longer selected, or being deleted and no finalizer of uc's holds it.
func (w *Watcher) build(ctx context.Context, ctl *core.Controller, key parentKey) (*built, error) {
	parent, err := w.reg.Object(ctl.Parent.GVR, key.Namespace, key.Name)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if !ctl.ParentSelector.Matches(core.LabelsOf(parent)) {
		return nil, nil
	}
	hook, ok := core.HookFor(ctl, parent)
	if !ok {
		return nil, nil
	}
	b := &built{parent: parent, meta: w.meta(ctl, parent, hook)}
	sel, err := ctl.Selector(parent)
	if err != nil {
		f := core.InvalidSelector(err)
		b.failure = &f
		return b, nil
	}
	_, span := w.tracer.Start(ctx, "claim")
	b.claimed, err = core.Claim(w.reg.ForRequests(), ctl, parent, sel)
	tracing.End(span, err)
	if err != nil {
		return nil, err
	}
	version := ctl.HookVersion(hook)
	related, ok, err := w.cachedRelated(ctx, ctl, parent, version)
	if err != nil || !ok {
		return b, err
	}
	if b.revs, err = w.liveRevisions(ctl, parent, &b.meta); err != nil {
		return nil, err
	}
	b.req = core.NewSyncRequest(ctl, parent, b.claimed, related, version, hook == hooks.Finalize)
	observeAll(&b.meta, b.req.Children, b.req.Related)
	return b, nil
}

// forget forgets a parent that needs no request: it is gone, or no longer
// the controller's.
func (w *Watcher) forget(key parentKey) {
	w.republish.forget(key)
	w.chain.forget(key)
}

// resyncLater syncs the parent again after the controller's
// resyncPeriodSeconds, if it has one.
func (w *Watcher) resyncLater(ctl *core.Controller, key parentKey) {
	if rs := ctl.Spec.ResyncPeriodSeconds; rs != nil && *rs > 0 {
		w.resyncAfter(key, time.Duration(*rs)*time.Second)
	}
}

// olderRevision is the parent as it was at an older revision.
type olderRevision struct {
	hash   string
	parent *unstructured.Unstructured
}

// liveRevisions returns, for a controller that rolls its children out, the
// older revisions of the parent that children are still on, and records in
// meta every revision the hook is asked about, the latest first.
func (w *Watcher) liveRevisions(ctl *core.Controller, parent *unstructured.Unstructured, meta *bus.Meta) ([]olderRevision, error) {
	if !ctl.Rolling() {
		return nil, nil
	}
	paths := revision.FieldPaths(&ctl.Spec)
	latest, err := revision.Hash(revision.Patch(parent, paths))
	if err != nil {
		return nil, err
	}
	meta.Revisions = []string{latest}
	owned, err := w.reg.Owned(v1alpha1.RevisionResource, parent.GetNamespace(), parent.GetUID())
	if err != nil {
		return nil, err
	}
	var older []olderRevision
	for _, u := range owned {
		rev, err := revision.Decode(u)
		if err != nil {
			return nil, err
		}
		if rev.Hash == latest || !rev.HasChildren() {
			continue
		}
		patch, err := rev.PatchOf()
		if err != nil {
			return nil, err
		}
		older = append(older, olderRevision{rev.Hash, revision.At(parent, patch, paths)})
		meta.Revisions = append(meta.Revisions, rev.Hash)
	}
	return older, nil
}

// meta is what the events of one hook call say about the parent.
func (w *Watcher) meta(ctl *core.Controller, parent *unstructured.Unstructured, hook string) bus.Meta {
	m := bus.Meta{
		Address: bus.Address{
			Controller: ctl.Name,
			Hook:       hook,
			Partition:  ctl.Partition(parent, w.opts.Partitions),
			ParentUID:  parent.GetUID(),
		},
		Namespace:       parent.GetNamespace(),
		Name:            parent.GetName(),
		Generation:      parent.GetGeneration(),
		ResourceVersion: parent.GetResourceVersion(),
		Observation:     w.observation(ctl, parent),
		Observed:        time.Now(),
	}
	if ctl.Decorator != nil {
		m.Resource = ctl.Parent.Key()
	}
	return m
}

// maxWaitsForCache bounds the syncs a parent waits for a cache that holds
// it older than its last request: 12 retries, backing off from 5 ms, are
// some 20 s.
const maxWaitsForCache = 12

// publishRequest publishes the sync or finalize request of a parent as it
// is, with an id chained to its last request's (see requestChain), and
// returns that id. A parent older in the cache than in its last request is
// not published (errCacheBehind), and meta's observation is stamped again
// if it is not later than that request's. A resync's request is forced.
func (w *Watcher) publishRequest(ctx context.Context, key parentKey, resync bool, meta *bus.Meta, parent *unstructured.Unstructured, req any, observed []byte) (string, error) {
	last, err := w.chain.previous(ctx, key, *meta)
	if err != nil {
		return "", err
	}
	if err := notBehind(parent, last); err != nil {
		if w.queue.NumRequeues(key) < maxWaitsForCache {
			return "", err
		}
		w.log.Warn("publishing a parent the cache still holds older than its last request", append(meta.LogArgs(), "err", err)...)
	}
	if meta.Observation < last.observation {
		// The caches are behind the last request's: they catch up within
		// moments. (Past maxWaitsForCache the request goes out, and the
		// appliers drop its reply if a newer observation was applied.)
		err := fmt.Errorf("%w: observation %d, %d last", errCacheBehind, meta.Observation, last.observation)
		if w.queue.NumRequeues(key) < maxWaitsForCache {
			return "", err
		}
		w.log.Warn("publishing a parent whose caches are still behind its last request", append(meta.LogArgs(), "err", err)...)
	}
	typ, subject := bus.RequestType(meta.Hook), meta.RequestSubject()
	id, err := w.chain.next(ctx, last, observedHash(subject, typ, observed), resync)
	if err != nil {
		return "", err
	}
	if err := w.publish(ctx, *meta, typ, subject, req, id); err != nil {
		return "", err
	}
	w.chain.published(key, *meta, id, last)
	return id, nil
}

// publish sends one CloudEvent about a parent to JetStream with that id,
// or, if id is empty, an id derived from its subject, type and data: the
// bus drops an event whose id it took in the last two minutes. The event
// carries the trace context of its publish span.
func (w *Watcher) publish(ctx context.Context, meta bus.Meta, typ, subject string, data any, id string) (err error) {
	ctx, span := w.tracer.Start(ctx, "publish", trace.WithSpanKind(trace.SpanKindProducer))
	tracing.SetAttributes(span, func() []attribute.KeyValue {
		return append(tracing.Parent(meta), attribute.String("messaging.destination.name", subject), attribute.String("cloudevents.event_type", typ))
	})
	defer func() { tracing.End(span, err) }()
	e := event.New()
	e.SetType(typ)
	e.SetSource("/universalcontroller/" + meta.Controller)
	e.SetSubject(meta.Key())
	body, err := encode(data)
	if err != nil {
		return fmt.Errorf("encode %s: %w", typ, err)
	}
	if err := e.SetData(event.ApplicationJSON, body); err != nil {
		return fmt.Errorf("encode %s: %w", typ, err)
	}
	if id == "" {
		id = eventID(subject, typ, e.Data(), false)
	}
	e.SetID(id)
	e.SetTime(time.Now())
	if typ == bus.RequestType(meta.Hook) {
		meta.Failures = w.republish.retries(meta) // a retry is tried once
	}
	meta.SetOn(&e)
	bus.InjectTrace(ctx, &e)
	msg, err := bus.ToMsg(ctx, subject, &e)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, busTimeout)
	defer cancel()
	if w.opts.Lease != nil {
		if err := w.opts.Lease(); err != nil {
			return fmt.Errorf("publish %s for %s: %w: %w", typ, meta.Key(), errNotLeading, err)
		}
	}
	ack, err := w.js.PublishMsg(ctx, msg, jetstream.WithMsgID(id))
	if err != nil {
		return fmt.Errorf("publish %s for %s: %w", typ, meta.Key(), err)
	}
	tracing.SetAttributes(span, func() []attribute.KeyValue {
		return []attribute.KeyValue{attribute.String("cloudevents.event_id", id), attribute.Bool("uc.duplicate", ack.Duplicate)}
	})
	if typ == bus.RequestType(meta.Hook) && meta.Revision == "" && meta.Hook != hooks.SyncShadow {
		w.republish.published(meta, id) // a request for the parent as it is (the shadow's is not applied)
	}
	w.log.Debug("published", append(meta.LogArgs(), "type", typ, "observation", meta.Observation,
		"id", id, "duplicate", ack.Duplicate)...) // duplicate: dropped by the bus, which holds or held that request
	return nil
}

// observed identifies what a sync request observed.
func observed(ctl *core.Controller, req *hooks.SyncRequest) []byte {
	return observedObjects(ctl, req.Finalizing, req.Parent, req.Children, req.Related)
}

// observedObjects identifies what a request observed: every object in it by
// UID and resourceVersion, and the controller's generation (not the
// controller object: its status changes when nothing the hook sees does).
func observedObjects(ctl *core.Controller, finalizing bool, parent *unstructured.Unstructured, groups ...hooks.GroupedObjects) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%d %t %s@%s", ctl.Generation, finalizing, parent.GetUID(), parent.GetResourceVersion())
	for _, group := range groups {
		b.WriteString(" |")
		for _, kind := range slices.Sorted(maps.Keys(group)) {
			fmt.Fprintf(&b, " %s:", kind)
			for _, key := range slices.Sorted(maps.Keys(group[kind])) {
				o := group[kind][key]
				fmt.Fprintf(&b, " %s=%s@%s", key, o.GetUID(), o.GetResourceVersion())
			}
		}
	}
	return b.Bytes()
}

// eventID is the id of an event that is not a parent's sync or finalize
// request (see requestID): a hash of what it says, plus a random part when
// forced.
func eventID(subject, typ string, data []byte, forced bool) string {
	id := observedHash(subject, typ, data)
	if forced {
		id += "-" + uuid.NewString()[:8]
	}
	return id
}
