// Package hook is the Go SDK for bus-native hooks: it serves a Go function
// as one controller's hook, consuming the hook's requests from JetStream and
// publishing its replies, with bounded concurrency and graceful shutdown.
// It keeps the delivery promises of the controller's spec.hooks.<hook>.delivery
// (see Policy): a timeout per call, retries with jittered exponential backoff,
// a 429's Retry-After honoured for the parent, and, after the last try, the
// request in the dead-letter stream and a failure event for the applier,
// which reports it on the parent. The dispatcher serves webhooks and
// Knative destinations with this same code.
//
//	func sync(ctx context.Context, req *hook.SyncRequest) (*hook.SyncResponse, error) {
//		foo, err := hook.Decode[Foo](req.Parent)
//		...
//	}
//
//	func main() { hook.Main("foo-controller", hook.Sync(sync)) }
//
// A reply may also speak back to the parent's user: SyncResponse's
// Events are recorded on the parent, its Conditions set in the parent's
// status.conditions (see docs/bus.md, "Speaking back").
//
// A UniversalDecorator's hooks are served the same way, under its controller
// name on the bus and with DecoratorSync and DecoratorFinalize:
//
//	hook.Main(bus.DecoratorController("service-per-pod"), hook.DecoratorSync(sync))
//
// The SDK depends on nats.go, the CloudEvents SDK and uc's bus contract
// (schemas/bus) only: a hook carries no Kubernetes client.
package hook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"runtime/debug"
	"sync"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/trace"

	"universalcontroller.dev/uc/schemas/bus"
)

// Handler serves one hook: it turns the request's JSON data into the reply's.
// Its context ends at the call's timeout, and holds the request (Request)
// and a logger naming the parent (Logger). A reply that is a []byte is sent
// as is; anything else is encoded as JSON. An *Error says why a call failed.
type Handler interface {
	Hook() string
	Handle(ctx context.Context, data []byte) (any, error)
}

// SyncFunc computes a parent's desired state from its observed state. It
// serves the sync and finalize hooks.
type SyncFunc func(ctx context.Context, req *SyncRequest) (*SyncResponse, error)

// Sync serves fn as the sync hook.
func Sync(fn SyncFunc) Handler { return Func(syncHook, fn) }

// Shadow serves fn as the sync hook's shadow (spec.hooks.sync.shadow, the
// hook sync-shadow): a new version of a sync hook, called with the same
// requests, whose replies uc compares with the sync hook's and never
// applies.
func Shadow(fn SyncFunc) Handler { return Func(syncShadowHook, fn) }

// Finalize serves fn as the finalize hook.
func Finalize(fn SyncFunc) Handler { return Func(finalizeHook, fn) }

// CustomizeFunc says which related objects a parent's sync requests carry.
type CustomizeFunc func(ctx context.Context, req *CustomizeRequest) (*CustomizeResponse, error)

// Customize serves fn as the customize hook.
func Customize(fn CustomizeFunc) Handler { return Func(customizeHook, fn) }

// DecoratorFunc computes a decorated object's desired attachments, labels,
// annotations and status from its observed state. It serves a
// UniversalDecorator's sync and finalize hooks; serve them under the
// decorator's controller name, bus.DecoratorController(name).
type DecoratorFunc func(ctx context.Context, req *DecoratorRequest) (*DecoratorResponse, error)

// DecoratorSync serves fn as a decorator's sync hook.
func DecoratorSync(fn DecoratorFunc) Handler { return Func(syncHook, fn) }

// DecoratorFinalize serves fn as a decorator's finalize hook.
func DecoratorFinalize(fn DecoratorFunc) Handler { return Func(finalizeHook, fn) }

// Func serves fn as the named hook ("sync", "finalize" or "customize"),
// with request and reply types of one's own: the request's JSON is decoded
// into a Req, and the Resp fn returns is encoded as the reply — for
// instance schemas/hooks' types, whose objects are Kubernetes'
// unstructured.Unstructured.
func Func[Req, Resp any](hook string, fn func(context.Context, *Req) (*Resp, error)) Handler {
	return typedHandler[Req, Resp]{hook, fn}
}

// typedHandler serves a function of typed request and reply as a hook.
type typedHandler[Req, Resp any] struct {
	hook string
	fn   func(context.Context, *Req) (*Resp, error)
}

func (h typedHandler[Req, Resp]) Hook() string { return h.hook }

func (h typedHandler[Req, Resp]) Handle(ctx context.Context, data []byte) (any, error) {
	var req Req
	if err := json.Unmarshal(data, &req); err != nil {
		return nil, fmt.Errorf("decode %s request: %w", h.hook, err)
	}
	return h.fn(ctx, &req)
}

type callKey struct{}

type callInfo struct {
	req *event.Event
	log *slog.Logger
}

// ContextWithRequest is the context Serve calls a handler with: it holds
// the request and the call's logger. Use it to call a handler elsewhere,
// e.g. in its tests.
func ContextWithRequest(ctx context.Context, req *event.Event, log *slog.Logger) context.Context {
	return context.WithValue(ctx, callKey{}, callInfo{req, log})
}

// Request is the request a handler is called with, as the CloudEvent that
// carried it.
func Request(ctx context.Context) (*event.Event, bool) {
	c, ok := ctx.Value(callKey{}).(callInfo)
	return c.req, ok
}

// Logger is the logger of the call, with the controller, hook, parent and
// request, or slog.Default() outside a call.
func Logger(ctx context.Context) *slog.Logger {
	if c, ok := ctx.Value(callKey{}).(callInfo); ok {
		return c.log
	}
	return slog.Default()
}

// Option configures Serve.
type Option func(*options)

type options struct {
	concurrency int
	policy      Policy
	log         *slog.Logger
	onPanic     func()
	tracer      trace.Tracer
}

// WithConcurrency sets how many requests are served at once (default 16).
// A request that hangs takes one of them until its timeout, never more.
func WithConcurrency(n int) Option { return func(o *options) { o.concurrency = n } }

// WithTimeout bounds one call of the hook function when the controller sets
// no timeout (default 10s). The call's context ends then, and the request
// is retried.
func WithTimeout(d time.Duration) Option { return func(o *options) { o.policy.Timeout = d } }

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// OnPanic calls fn whenever a call panicked: the handler, or the encoding
// of its reply. The panic is logged with its stack and fails the call,
// which is retried; the worker stays up. (uc counts them in its metrics.)
func OnPanic(fn func()) Option { return func(o *options) { o.onPanic = fn } }

// Serve serves h as the named controller's hook until ctx ends, then stops
// taking requests and waits for those in flight. It waits for the hook's
// consumer, which uc creates when the controller is registered, and, when
// the consumer is gone (a NATS server restarted without it) or made anew,
// waits for it again and goes on with the new one.
func Serve(ctx context.Context, js jetstream.JetStream, controller string, h Handler, opts ...Option) error {
	o := options{concurrency: 16, policy: DefaultPolicy, log: slog.Default(), tracer: bus.Tracer(nil)}
	for _, opt := range opts {
		opt(&o)
	}
	s := &server{js: js, controller: controller, h: h, opts: o,
		log:       o.log.With("controller", controller, "hook", h.Hook()),
		notBefore: map[string]time.Time{}}
	// One queue across consumers: a request in service when its consumer
	// was made anew is not served twice at once.
	q := newParentQueue(o.concurrency)
	defer q.wait()
	for {
		cons, err := s.consumer(ctx)
		if err != nil {
			return err
		}
		if err := s.consume(ctx, cons, q); err != nil || ctx.Err() != nil {
			return err
		}
		s.log.Warn("the hook's consumer is gone or was made anew; waiting for it", "consumer", cons.CachedInfo().Name)
	}
}

type server struct {
	js         jetstream.JetStream
	controller string
	h          Handler
	opts       options
	log        *slog.Logger

	mu        sync.Mutex
	notBefore map[string]time.Time // by parent UID: parents whose hook asked to wait (429 Retry-After)
}

// consumer waits until the hook's durable consumer exists.
func (s *server) consumer(ctx context.Context) (jetstream.Consumer, error) {
	name := bus.HookConsumer(s.controller, s.h.Hook())
	for delay := 100 * time.Millisecond; ; delay = min(2*delay, 5*time.Second) {
		cons, err := s.js.Consumer(ctx, bus.RequestStream, name)
		switch {
		case err == nil:
			return cons, nil
		case errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrStreamNotFound):
			s.log.Info("waiting for the controller to be registered", "consumer", name)
		case ctx.Err() == nil:
			// A bus that is down or electing a leader: wait for it.
			s.log.Warn("waiting for the bus", "consumer", name, "err", err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(delay):
		}
	}
}

// consume serves the consumer's requests until ctx ends, or the consumer is
// gone or made anew. It pulls only as many requests as it has free slots:
// a request waits in this process only behind its own parent's call, where
// the heartbeat covers it, never in a client-side buffer, where nothing
// would and the consumer's short ack wait would deliver it again.
func (s *server) consume(ctx context.Context, cons jetstream.Consumer, q *parentQueue) error {
	consuming, stop := context.WithCancel(ctx)
	defer stop()
	go s.watchConsumer(consuming, cons, stop)
	s.log.Info("serving")
	heartbeatCtx, stopHeartbeat := context.WithCancel(context.WithoutCancel(ctx))
	defer stopHeartbeat()
	// The consumer's ack wait as it was bound, or uc's if uc shortened it
	// since.
	go heartbeat(heartbeatCtx, q, min(cons.CachedInfo().Config.AckWait, bus.AckWait)/3)
	serve := func(m jetstream.Msg) { s.serve(context.WithoutCancel(ctx), m) }
	for {
		n := q.free(consuming)
		if n == 0 {
			return nil
		}
		err := pull(consuming, cons, n, func(m jetstream.Msg) { q.add(m, serve) })
		switch {
		case consuming.Err() != nil || bus.ConsumerLost(err) || errors.Is(err, nats.ErrNoResponders):
			return nil // Serve waits for the consumer
		case err != nil:
			// The bus is down or electing a leader: pull again soon.
			s.log.Warn("pull requests", "err", err)
			select {
			case <-consuming.Done():
			case <-time.After(time.Second):
			}
		}
	}
}

// pullWait bounds one pull request: a pull the server lost (it restarted)
// is replaced within it.
const pullWait = 5 * time.Second

// pull asks the consumer for up to n requests, waiting at most pullWait,
// and hands each one to add as it comes.
func pull(ctx context.Context, cons jetstream.Consumer, n int, add func(jetstream.Msg)) error {
	ctx, cancel := context.WithTimeout(ctx, pullWait)
	defer cancel()
	batch, err := cons.Fetch(n, jetstream.FetchContext(ctx))
	if err != nil {
		return fmt.Errorf("pull: %w", err)
	}
	for m := range batch.Messages() {
		add(m)
	}
	if err := batch.Error(); err != nil && ctx.Err() == nil {
		return fmt.Errorf("pull: %w", err)
	}
	return nil
}

// watchConsumer calls stop when the consumer is gone or was made anew,
// checking every bus.CheckEvery until ctx ends. Nothing tells a client that
// a NATS server restarted without the consumer: its pulls go unanswered.
func (s *server) watchConsumer(ctx context.Context, cons jetstream.Consumer, stop context.CancelFunc) {
	created := cons.CachedInfo().Created
	tick := time.NewTicker(bus.CheckEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		info, err := cons.Info(ctx)
		if errors.Is(err, jetstream.ErrConsumerNotFound) || (err == nil && !info.Created.Equal(created)) {
			stop()
			return
		}
	}
}

// heartbeat tells JetStream that every request the queue holds is still
// being worked on, so a long call, or a request waiting for its parent's
// call, is not delivered again meanwhile.
func heartbeat(ctx context.Context, q *parentQueue, every time.Duration) {
	tick := time.NewTicker(max(every, 100*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			q.each(func(m jetstream.Msg) { _ = m.InProgress() })
		}
	}
}

// serve answers one request. A failed call is retried after a backoff; after
// its last delivery the request is dead-lettered. A request that cannot be
// decoded is terminated.
func (s *server) serve(ctx context.Context, msg jetstream.Msg) {
	req, err := bus.FromMsg(ctx, msg.Subject(), msg.Headers(), msg.Data())
	var meta bus.Meta
	if err == nil {
		meta, err = bus.MetaOf(req)
	}
	if err != nil {
		s.log.Error("bad request", "subject", msg.Subject(), "err", err)
		_ = msg.Term()
		return
	}
	log := s.log.With("parent", meta.Key(), "request", req.ID())
	if wait := s.holdOff(string(meta.ParentUID), 0); wait > 0 {
		log.Debug("hook asked to wait", "retryIn", wait)
		_ = msg.NakWithDelay(wait)
		return
	}
	policy := s.opts.policy.ForRequest(req.Data(), meta.Hook).ForRetry(meta.Failures)
	ctx, span := s.traceCall(ctx, msg, req, meta)
	err = s.answer(ContextWithRequest(ctx, req, log), req, meta, policy.Timeout)
	bus.EndSpan(span, err)
	if err == nil {
		log.Debug("replied")
		if err := msg.Ack(); err != nil {
			log.Warn("ack", "err", err)
		}
		return
	}
	deliveries := 1
	if md, mdErr := msg.Metadata(); mdErr == nil {
		deliveries = int(md.NumDelivered)
	}
	reason, retryAfter := ReasonOf(err)
	if deliveries >= policy.MaxDeliveries {
		s.deadLetter(ctx, msg, req, meta, bus.Failure{Reason: reason, Message: err.Error(), Deliveries: deliveries}, log)
		return
	}
	delay := policy.jitteredBackoff(deliveries)
	if retryAfter > 0 {
		delay = s.holdOff(string(meta.ParentUID), retryAfter)
	}
	log.Warn("hook failed; will retry", "reason", reason, "err", err, "delivery", deliveries, "retryIn", delay)
	if deliveries == 1 && retryAfter == 0 && len(meta.Revisions) <= 1 {
		// The parent says so at once, not only when the request is
		// dead-lettered minutes later. A hook asking to wait (429) is busy,
		// not failing; and where the applier waits for the replies about
		// several revisions, a report would stand for one of them.
		f := bus.Failure{Reason: reason, Message: err.Error(), Deliveries: deliveries, Retrying: true}
		if err := s.publish(ctx, req, meta, bus.FailureType(meta.Hook), f); err != nil {
			log.Warn("report the failure", "err", err)
		}
	}
	_ = msg.NakWithDelay(delay)
}

// holdOff records that the parent's hook asked not to be called for d, when
// d is positive, and returns how long it must still wait.
func (s *server) holdOff(parent string, d time.Duration) time.Duration {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if d > 0 {
		s.notBefore[parent] = now.Add(d)
	}
	wait := s.notBefore[parent].Sub(now)
	if wait <= 0 {
		delete(s.notBefore, parent)
	}
	return max(wait, 0)
}

// answer calls the handler and publishes its reply. A panic — of the
// handler, or of encoding its reply — is a failed call: the request is
// retried, then dead-lettered, and the worker stays up.
func (s *server) answer(ctx context.Context, req *event.Event, meta bus.Meta, timeout time.Duration) (err error) {
	defer recoverCall(&err, Logger(ctx), s.opts.onPanic)
	reply, err := call(ctx, s.h, req.Data(), timeout, s.opts.onPanic)
	if err != nil {
		return err
	}
	return s.publish(ctx, req, meta, bus.ResponseType(meta.Hook), reply)
}

// recoverCall, deferred by a function that serves one call and returns
// its error in *err, turns a panic of that function into *err: it logs the
// panic with the stack and calls onPanic, if any. It must be deferred
// itself, not called from a deferred function: only then does it see the
// panic.
func recoverCall(err *error, log *slog.Logger, onPanic func()) {
	r := recover()
	if r == nil {
		return
	}
	log.Error("recovered from a panic", "panic", r, "stack", string(debug.Stack()))
	if onPanic != nil {
		onPanic()
	}
	*err = fmt.Errorf("panic: %v", r)
}

// Call calls h with a request's data within timeout, as Serve does. A
// handler that does not return in time is left behind, so it never holds
// up other requests; a panic becomes an error. ReasonOf tells why a call
// failed.
func Call(ctx context.Context, h Handler, data []byte, timeout time.Duration) (any, error) {
	return call(ctx, h, data, timeout, nil)
}

// call is Call, telling onPanic of a panic of the handler.
func call(ctx context.Context, h Handler, data []byte, timeout time.Duration, onPanic func()) (any, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	type result struct {
		reply any
		err   error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		defer func() { done <- r }()
		defer recoverCall(&r.err, Logger(ctx), onPanic)
		r.reply, r.err = h.Handle(ctx, data)
	}()
	select {
	case r := <-done:
		if r.err != nil && ctx.Err() != nil {
			return nil, &Error{Reason: ReasonTimeout, Err: fmt.Errorf("no reply within %s: %w", timeout, r.err)}
		}
		return r.reply, r.err
	case <-ctx.Done():
		return nil, &Error{Reason: ReasonTimeout, Err: fmt.Errorf("no reply within %s", timeout)}
	}
}

// publish sends an event answering req on the request's reply subject: the
// hook's reply, or a failure. It carries the request's uc* extensions.
func (s *server) publish(ctx context.Context, req *event.Event, meta bus.Meta, typ string, data any) error {
	e := event.New()
	e.SetID(uuid.NewString())
	e.SetType(typ)
	e.SetSource("/universalcontroller/" + meta.Controller + "/worker")
	e.SetSubject(req.Subject())
	e.SetTime(time.Now())
	meta.RequestID = req.ID()
	meta.SetOn(&e)
	bus.InjectTrace(ctx, &e)
	if err := e.SetData(event.ApplicationJSON, data); err != nil {
		return &Error{Reason: ReasonInvalidReply, Err: fmt.Errorf("encode %s: %w", typ, err)}
	}
	out, err := bus.ToMsg(ctx, meta.ReplySubject(), &e)
	if err != nil {
		return err
	}
	if _, err := s.js.PublishMsg(ctx, out, jetstream.WithMsgID(e.ID())); err != nil {
		return fmt.Errorf("publish %s: %w", typ, err)
	}
	return nil
}

// Headers a dead letter carries besides the request's own.
const (
	HeaderFailureReason  = "Uc-Failure-Reason"
	HeaderFailureMessage = "Uc-Failure-Message"
)

// deadLetter moves a request whose last delivery failed to the dead-letter
// stream, tells the applier why on the reply subject, and terminates the
// request. When a publish fails, the request is tried again and
// dead-lettered again; the dead letter keeps the request's message id, so
// the stream holds it once.
func (s *server) deadLetter(ctx context.Context, msg jetstream.Msg, req *event.Event, meta bus.Meta, f bus.Failure, log *slog.Logger) {
	log = log.With("reason", f.Reason, "deliveries", f.Deliveries)
	header := maps.Clone(msg.Headers())
	header.Set(HeaderFailureReason, f.Reason)
	header.Set(HeaderFailureMessage, f.Message)
	_, err := s.js.PublishMsg(ctx, &nats.Msg{Subject: meta.DeadLetterSubject(), Header: header, Data: msg.Data()})
	if err == nil {
		err = s.publish(ctx, req, meta, bus.FailureType(meta.Hook), f)
	}
	if err != nil {
		log.Error("dead-letter failed; will retry", "err", err)
		_ = msg.NakWithDelay(time.Second)
		return
	}
	log.Error("hook failed; request dead-lettered", "err", f.Message)
	if err := msg.TermWithReason(f.Reason); err != nil {
		log.Warn("terminate", "err", err)
	}
}
