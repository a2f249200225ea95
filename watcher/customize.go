package watcher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/trace"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"universalcontroller.dev/uc/core"
	"universalcontroller.dev/uc/internal/compact"
	"universalcontroller.dev/uc/internal/recovery"
	"universalcontroller.dev/uc/internal/topology"
	"universalcontroller.dev/uc/internal/tracing"
	"universalcontroller.dev/uc/internal/verdict"
	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// A controller with a customize hook asks it, once per parent generation,
// which related objects the parent's sync requests carry. The watcher
// consumes the customize replies itself, caches them per parent and
// generation, and re-syncs exactly the parents whose rules select a related
// object that changed.

// customized is a parent's customize reply.
type customized struct {
	key        parentKey
	generation int64
	rules      core.Rules
	span       trace.SpanContext // of the reply's handling: the syncs that use it link to it
}

// customizeCache holds the customize replies by parent, keyed as the
// appliers key them (bus.Address.ApplyKey): a decorated object has one
// reply per decorator.
type customizeCache struct {
	mu      sync.RWMutex
	parents map[types.UID]*customized
}

func (c *customizeCache) get(uid types.UID) *customized {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.parents[uid]
}

func (c *customizeCache) put(uid types.UID, cz *customized) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.parents[uid]; old == nil || old.generation <= cz.generation {
		c.parents[uid] = cz
	}
}

// forget drops the replies of a controller's parents.
func (c *customizeCache) forget(controller string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for uid, cz := range c.parents {
		if cz.key.Controller == controller {
			delete(c.parents, uid)
		}
	}
}

// selecting lists the parents of a controller whose rules select obj.
func (c *customizeCache) selecting(controller string, gvr schema.GroupVersionResource, obj metav1.Object, nsLabels func(string) labels.Set) []parentKey {
	c.mu.RLock()
	defer c.mu.RUnlock()
	var out []parentKey
	for _, cz := range c.parents {
		if cz.key.Controller != controller {
			continue
		}
		if cz.rules.Selects(gvr, obj, cz.key.Namespace, nsLabels) {
			out = append(out, cz.key)
		}
	}
	return out
}

// retryDelay is how long a customize reply that could not be handled waits.
const retryDelay = 2 * time.Second

// consumeCustomizeReplies takes, with consumer c, the customize replies of
// every controller (of the partitions c consumes).
// The consumer is created within attempt; the replies are handled within
// ctx, tracked by unsettled meanwhile (the ack wait is the bus's short one,
// so that a reply a dead watcher had not settled comes back within seconds).
// onLost hears that the consumer may be gone. The consumers of the other
// kind of watcher, which overlap c on the work-queue stream, are deleted
// when they are in the way (see role).
func (w *Watcher) consumeCustomizeReplies(ctx, attempt context.Context, c topology.Consumer, unsettled *bus.Unsettled, onLost func()) (*topology.KeptConsumer, error) {
	displacing := topology.Displacing{Consumers: w.role().Deletes, Log: w.log}
	return topology.KeepDisplacing(attempt, w.js, c, displacing, func(msg jetstream.Msg) {
		msg = unsettled.Track(msg)
		if err := w.customizeReplyWithin(ctx, msg); err != nil {
			level := slog.LevelError
			if verdict.Of(err) == verdict.Wait {
				level = slog.LevelDebug
			}
			w.log.Log(ctx, level, "customize reply", "subject", msg.Subject(), "err", err)
			_ = msg.NakWithDelay(retryDelay)
			return
		}
		_ = msg.Ack()
	}, onLost)
}

// errNotRegisteredYet is a customize reply of a controller the watcher's
// registry has not registered yet. It waits (verdict.Wait), no failure: a
// new watcher (a process started, a shard's new term, one watcher after
// shards) takes the replies that waited in the stream before its registry
// has listed the controllers.
var errNotRegisteredYet = verdict.Wait.Mark(errors.New("not registered here yet"))

// customizeReplyWithin handles a customize reply within itemTimeout. A
// panic fails it, and the reply is retried like any failed one.
func (w *Watcher) customizeReplyWithin(ctx context.Context, msg jetstream.Msg) (err error) {
	defer recovery.Recover(&err, recovery.Watcher, w.log, "subject", msg.Subject())
	ctx, cancel := context.WithTimeout(ctx, itemTimeout)
	defer cancel()
	return w.onCustomizeReply(ctx, msg)
}

// onCustomizeReply caches a customize reply and syncs its parent, or reports
// a reply it cannot use on the parent.
func (w *Watcher) onCustomizeReply(ctx context.Context, msg jetstream.Msg) error {
	e, err := bus.FromMsg(ctx, msg.Subject(), msg.Headers(), msg.Data())
	if err != nil {
		return nil // not a uc event: nothing to retry
	}
	// The customize call's trace goes on: the sync that asked for it.
	ctx, span := w.tracer.Start(bus.ExtractTrace(ctx, e), "customize reply", trace.WithSpanKind(trace.SpanKindConsumer))
	defer span.End()
	meta, err := bus.MetaOfReply(msg.Subject(), e)
	if err != nil {
		w.log.Error("dropping a customize reply that is not a uc reply", "subject", msg.Subject(), "err", err)
		return nil
	}
	ctl, ok := w.reg.Get(meta.Controller)
	if !ok && w.reg.MayExist(meta.Controller) {
		return fmt.Errorf("controller %s: %w", meta.Controller, errNotRegisteredYet)
	}
	if !ok {
		return nil
	}
	key := parentKey{ctl.Name, meta.Resource, meta.Namespace, meta.Name}
	failure := func(f bus.Failure) error {
		// The applier reports failures of the parent's sync.
		meta.Hook = hooks.Sync
		return w.publish(ctx, meta, bus.FailureType(hooks.Sync), meta.ReplySubject(), f, "")
	}
	if e.Type() == bus.FailureType(hooks.Customize) {
		var f bus.Failure
		if err := utiljson.Unmarshal(e.Data(), &f); err != nil {
			f.Message = err.Error()
		}
		if !f.Retrying {
			w.republish.failed(key, meta.RequestID, time.Now()) // it was dead-lettered
		}
		// One message whether it is retried now or later (see
		// applier's failed).
		return failure(bus.Failure{Reason: v1alpha1.ReasonHookFailed, Message: fmt.Sprintf("customize hook failed, will retry: %s: %s", f.Reason, f.Message)})
	}
	rules, err := w.decodeCustomize(ctx, ctl, e.Data())
	if err != nil {
		w.republish.failed(key, meta.RequestID, time.Now())
		return failure(core.CustomizeRejected(err))
	}
	w.customize.put(meta.ApplyKey(), &customized{key: key, generation: meta.Generation, rules: rules, span: span.SpanContext()})
	// The hook answered: the parent's sync is asked at once, its backoff
	// starts again.
	w.enqueueChanged(key, 0)
	return nil
}

// decodeCustomize decodes and resolves a customize reply, and starts
// watching every related resource it names.
func (w *Watcher) decodeCustomize(ctx context.Context, ctl *core.Controller, data []byte) (core.Rules, error) {
	rules, err := core.CustomizeRules(ctl, data, w.reg.Resolve)
	if err != nil {
		return core.Rules{}, err
	}
	for _, res := range rules.Resources() {
		if err := w.watchRelated(ctx, ctl, res); err != nil {
			return core.Rules{}, err
		}
	}
	return rules, nil
}

// watchRelated makes sure the watcher follows a related resource for the
// controller: a change re-syncs the parents whose rules select the object.
func (w *Watcher) watchRelated(ctx context.Context, ctl *core.Controller, res core.Resource) error {
	if err := w.reg.Watch(ctx, ctl.Name, res.GVR); err != nil {
		return err
	}
	if err := w.reg.Watch(ctx, ctl.Name, namespacesGVR); err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	inf := w.reg.RelatedInformer(res.GVR)
	for _, h := range w.handlers[ctl.Name] {
		if h.informer == inf && h.related {
			return nil
		}
	}
	name, gvr := ctl.Name, res.GVR
	reg, err := inf.AddEventHandler(changeHandler(func(obj any) {
		if m, ok := compact.Meta(obj); ok {
			for _, key := range w.customize.selecting(name, gvr, m, w.namespaceLabels) {
				w.enqueueChanged(key, 0)
			}
		}
	}, changedRV))
	if err != nil {
		return fmt.Errorf("watch related %s: %w", res.GVR.Resource, err)
	}
	w.handlers[ctl.Name] = append(w.handlers[ctl.Name], handler{informer: inf, reg: reg, related: true})
	return nil
}

var namespacesGVR = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}

// watchedFor lists the resources watchRelated follows for a customize
// reply's rules: theirs, and namespaces.
func watchedFor(rules core.Rules) []schema.GroupVersionResource {
	out := []schema.GroupVersionResource{namespacesGVR}
	for _, res := range rules.Resources() {
		out = append(out, res.GVR)
	}
	return out
}

// namespaceLabels returns a namespace's labels from the cache.
func (w *Watcher) namespaceLabels(ns string) labels.Set {
	obj, ok, err := w.reg.RelatedInformer(namespacesGVR).GetIndexer().GetByKey(ns)
	m, isObj := compact.Meta(obj)
	if err != nil || !ok || !isObj {
		return nil
	}
	return m.GetLabels()
}

// related returns the parent's related objects, or ok=false after asking the
// customize hook when it has no answer for the parent's generation yet
// (forced: with a request of its own id, see publish).
func (w *Watcher) related(ctx context.Context, ctl *core.Controller, parent *unstructured.Unstructured, version string, forced bool) (hooks.GroupedObjects, bool, error) {
	out, ok, err := w.cachedRelated(ctx, ctl, parent, version)
	if err != nil || ok {
		return out, ok, err
	}
	return nil, false, w.askCustomize(ctx, ctl, parent, forced)
}

// cachedRelated returns the parent's related objects, selected by the
// customize reply the watcher has for the parent's generation, or ok=false
// when it has none, or when the resources it names are no longer watched
// (the controller was registered anew, and its reply is about to be
// forgotten). The sync's span links to the customize reply it uses.
func (w *Watcher) cachedRelated(ctx context.Context, ctl *core.Controller, parent *unstructured.Unstructured, version string) (_ hooks.GroupedObjects, _ bool, err error) {
	if ctl.Spec.Hooks.Customize == nil {
		return hooks.GroupedObjects{}, true, nil
	}
	_, span := w.tracer.Start(ctx, "customize")
	defer func() { tracing.End(span, err) }()
	cz := w.customize.get(bus.Address{Controller: ctl.Name, ParentUID: parent.GetUID()}.ApplyKey())
	if cz == nil || cz.generation != parent.GetGeneration() || !w.reg.Watching(ctl.Name, watchedFor(cz.rules)...) {
		return nil, false, nil
	}
	span.AddLink(trace.Link{SpanContext: cz.span})
	out, err := cz.rules.Select(ctl, parent, version, w.listCached, w.namespaceLabels)
	return out, err == nil, err
}

// askCustomize publishes the parent's customize request (forced: with an
// id of its own, see publish).
func (w *Watcher) askCustomize(ctx context.Context, ctl *core.Controller, parent *unstructured.Unstructured, forced bool) error {
	meta := w.meta(ctl, parent, hooks.Customize)
	req := &hooks.CustomizeRequest{Controller: ctl.Object, Parent: parent}
	typ, subject := bus.RequestType(hooks.Customize), meta.RequestSubject()
	return w.publish(ctx, meta, typ, subject, req, eventID(subject, typ, observedObjects(ctl, false, parent), forced))
}

// listCached lists the related objects of a resource in a namespace (""
// for all) that sel selects from the shared cache (every object of the
// resource, whatever the partitions a watcher shard holds).
func (w *Watcher) listCached(gvr schema.GroupVersionResource, namespace string, sel labels.Selector) ([]*unstructured.Unstructured, error) {
	objs, err := w.reg.ListRelated(gvr, namespace, sel)
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, err
	}
	return objs, nil
}
