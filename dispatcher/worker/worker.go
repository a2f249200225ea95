// Package worker is the Go SDK for bus-native hooks: it serves a Go function
// as one controller's hook, consuming the hook's requests from JetStream and
// publishing its replies, with bounded concurrency and graceful shutdown.
//
//	func sync(ctx context.Context, req *hooks.SyncRequest) (*hooks.SyncResponse, error) { ... }
//
//	func main() { worker.Main("foo-controller", worker.Sync(sync)) }
package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
)

// SyncFunc computes a parent's desired state from its observed state. It
// serves the sync and finalize hooks.
type SyncFunc func(ctx context.Context, req *hooks.SyncRequest) (*hooks.SyncResponse, error)

// Handler serves one hook: it turns the request's JSON data into the reply's.
type Handler interface {
	Hook() string
	Handle(ctx context.Context, data []byte) (any, error)
}

type syncHandler struct {
	hook string
	fn   SyncFunc
}

// Sync serves fn as the sync hook.
func Sync(fn SyncFunc) Handler { return syncHandler{hooks.Sync, fn} }

// Finalize serves fn as the finalize hook.
func Finalize(fn SyncFunc) Handler { return syncHandler{hooks.Finalize, fn} }

func (h syncHandler) Hook() string { return h.hook }

func (h syncHandler) Handle(ctx context.Context, data []byte) (any, error) {
	var req hooks.SyncRequest
	if err := json.Unmarshal(data, &req); err != nil {
		return nil, fmt.Errorf("decode request: %w", err)
	}
	return h.fn(ctx, &req)
}

// Option configures Serve.
type Option func(*options)

type options struct {
	concurrency int
	timeout     time.Duration
	log         *slog.Logger
}

// WithConcurrency sets how many requests are served at once (default 16).
func WithConcurrency(n int) Option { return func(o *options) { o.concurrency = n } }

// WithTimeout bounds one call of the hook function (default 25s, under the
// consumer's 30s ack wait).
func WithTimeout(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// Serve serves h as the named controller's hook until ctx ends, then stops
// taking requests and waits for those in flight. It waits for the hook's
// consumer, which uc creates when the controller is registered.
func Serve(ctx context.Context, js jetstream.JetStream, controller string, h Handler, opts ...Option) error {
	o := options{concurrency: 16, timeout: 25 * time.Second, log: slog.Default()}
	for _, opt := range opts {
		opt(&o)
	}
	s := &server{js: js, controller: controller, h: h, opts: o,
		log: o.log.With("controller", controller, "hook", h.Hook())}
	cons, err := s.consumer(ctx)
	if err != nil {
		return err
	}
	return s.consume(ctx, cons)
}

type server struct {
	js         jetstream.JetStream
	controller string
	h          Handler
	opts       options
	log        *slog.Logger
}

// consumer waits until the hook's durable consumer exists.
func (s *server) consumer(ctx context.Context) (jetstream.Consumer, error) {
	name := bus.HookConsumer(s.controller, s.h.Hook())
	for delay := 100 * time.Millisecond; ; delay = min(2*delay, 5*time.Second) {
		cons, err := s.js.Consumer(ctx, bus.RequestStream, name)
		if err == nil {
			return cons, nil
		}
		if !errors.Is(err, jetstream.ErrConsumerNotFound) && !errors.Is(err, jetstream.ErrStreamNotFound) {
			return nil, fmt.Errorf("consumer %s: %w", name, err)
		}
		s.log.Info("waiting for the controller to be registered", "consumer", name)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(delay):
		}
	}
}

func (s *server) consume(ctx context.Context, cons jetstream.Consumer) error {
	msgs, err := cons.Messages(jetstream.PullMaxMessages(s.opts.concurrency))
	if err != nil {
		return fmt.Errorf("consume: %w", err)
	}
	go func() {
		<-ctx.Done()
		msgs.Drain()
	}()
	s.log.Info("serving")
	q := newParentQueue(s.opts.concurrency)
	defer q.wait()
	for {
		msg, err := msgs.Next()
		if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
			return nil
		}
		if err != nil {
			s.log.Warn("next request", "err", err)
			continue
		}
		q.add(msg, func(m jetstream.Msg) { s.serve(context.WithoutCancel(ctx), m) })
	}
}

// parentQueue serves at most one request per parent at a time. A request
// that arrives while its parent is being served waits, and a newer one
// replaces it: many changes during one hook call give one more call, with the
// latest state.
type parentQueue struct {
	sem      chan struct{}
	inflight sync.WaitGroup
	mu       sync.Mutex
	waiting  map[string]jetstream.Msg // by parent; nil while busy with nothing waiting
}

func newParentQueue(concurrency int) *parentQueue {
	return &parentQueue{sem: make(chan struct{}, concurrency), waiting: map[string]jetstream.Msg{}}
}

// parentOf is the per-parent token: the last token of the subject.
func parentOf(msg jetstream.Msg) string {
	subj := msg.Subject()
	return subj[strings.LastIndexByte(subj, '.')+1:]
}

func (q *parentQueue) add(msg jetstream.Msg, serve func(jetstream.Msg)) {
	parent := parentOf(msg)
	q.mu.Lock()
	prev, busy := q.waiting[parent]
	if busy {
		q.waiting[parent] = msg
		q.mu.Unlock()
		if prev != nil && !bus.SameMessage(prev, msg) {
			_ = prev.Ack() // superseded: the stream already holds only msg
		}
		return
	}
	q.waiting[parent] = nil
	q.mu.Unlock()
	q.sem <- struct{}{}
	q.inflight.Add(1)
	go func() {
		defer func() { <-q.sem; q.inflight.Done() }()
		for msg != nil {
			serve(msg)
			q.mu.Lock()
			msg = q.waiting[parent]
			if msg == nil {
				delete(q.waiting, parent)
			} else {
				q.waiting[parent] = nil
			}
			q.mu.Unlock()
		}
	}()
}

func (q *parentQueue) wait() { q.inflight.Wait() }

// serve answers one request. A failed call is retried by JetStream with a
// growing delay; a request that cannot be decoded is terminated.
func (s *server) serve(ctx context.Context, msg jetstream.Msg) {
	req, err := bus.FromMsg(ctx, msg.Subject(), msg.Headers(), msg.Data())
	if err != nil {
		s.log.Error("bad request", "subject", msg.Subject(), "err", err)
		_ = msg.Term()
		return
	}
	meta, err := bus.MetaOf(req)
	if err != nil {
		s.log.Error("bad request", "subject", msg.Subject(), "err", err)
		_ = msg.Term()
		return
	}
	log := s.log.With("parent", meta.Key(), "request", req.ID())
	reply, err := s.call(ctx, req)
	if err == nil {
		err = s.publish(ctx, req, meta, reply)
	}
	if err != nil {
		md, _ := msg.Metadata()
		delay := retryDelay(md)
		log.Error("hook failed", "err", err, "retryIn", delay)
		_ = msg.NakWithDelay(delay)
		return
	}
	log.Debug("replied")
	if err := msg.Ack(); err != nil {
		log.Warn("ack", "err", err)
	}
}

// call runs the handler with the timeout, turning a panic into an error.
func (s *server) call(ctx context.Context, req *event.Event) (reply any, err error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.timeout)
	defer cancel()
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("hook panicked: %v\n%s", r, debug.Stack())
		}
	}()
	return s.h.Handle(ctx, req.Data())
}

func (s *server) publish(ctx context.Context, req *event.Event, meta bus.Meta, reply any) error {
	e := event.New()
	e.SetID(uuid.NewString())
	e.SetType(bus.ResponseType(meta.Hook))
	e.SetSource("/universalcontroller/" + meta.Controller + "/worker")
	e.SetSubject(req.Subject())
	e.SetTime(time.Now())
	meta.RequestID = req.ID()
	meta.SetOn(&e)
	bus.SetTraceParent(&e, bus.ChildTraceParent(bus.TraceParent(req)))
	if err := e.SetData(event.ApplicationJSON, reply); err != nil {
		return fmt.Errorf("encode reply: %w", err)
	}
	out, err := bus.ToMsg(ctx, meta.ReplySubject(), &e)
	if err != nil {
		return err
	}
	if _, err := s.js.PublishMsg(ctx, out, jetstream.WithMsgID(e.ID())); err != nil {
		return fmt.Errorf("publish reply: %w", err)
	}
	return nil
}

// retryDelay grows with the number of deliveries: 1s, 2s, 4s … up to 1m.
func retryDelay(md *jetstream.MsgMetadata) time.Duration {
	n := uint64(1)
	if md != nil {
		n = md.NumDelivered
	}
	return min(time.Second<<min(n-1, 6), time.Minute)
}
