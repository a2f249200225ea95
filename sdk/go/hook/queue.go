package hook

import (
	"context"
	"strings"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"universalcontroller.dev/uc/schemas/bus"
)

// parentQueue serves at most one request per parent at a time. A request
// that arrives while its parent is being served waits, and a newer one
// replaces it: many changes during one hook call give one more call, with the
// latest state.
type parentQueue struct {
	sem      chan struct{}
	freed    chan struct{} // a slot was freed
	inflight sync.WaitGroup
	mu       sync.Mutex
	parents  map[string]*held // by parent, while it is being served
}

// held is what the queue holds of one parent: the request being served and
// the newest one waiting for it, if any.
type held struct{ serving, waiting jetstream.Msg }

func newParentQueue(concurrency int) *parentQueue {
	return &parentQueue{sem: make(chan struct{}, concurrency), freed: make(chan struct{}, 1), parents: map[string]*held{}}
}

// parentOf is the per-parent token: the last token of the subject.
func parentOf(msg jetstream.Msg) string {
	subj := msg.Subject()
	return subj[strings.LastIndexByte(subj, '.')+1:]
}

// add serves msg, or queues it behind its parent's request in service. It
// blocks while every slot is taken.
func (q *parentQueue) add(msg jetstream.Msg, serve func(jetstream.Msg)) {
	parent := parentOf(msg)
	q.mu.Lock()
	if h, busy := q.parents[parent]; busy {
		if bus.SameMessage(h.serving, msg) {
			q.mu.Unlock() // delivered again while in service: served once
			return
		}
		prev := h.waiting
		h.waiting = msg
		q.mu.Unlock()
		if prev != nil && !bus.SameMessage(prev, msg) {
			_ = prev.Ack() // superseded: the stream already holds only msg
		}
		return
	}
	h := &held{serving: msg}
	q.parents[parent] = h
	q.mu.Unlock()
	q.sem <- struct{}{}
	q.inflight.Add(1)
	go func() {
		defer func() {
			<-q.sem
			select {
			case q.freed <- struct{}{}:
			default:
			}
			q.inflight.Done()
		}()
		for {
			serve(msg)
			q.mu.Lock()
			msg = h.waiting
			if msg == nil {
				delete(q.parents, parent)
			}
			h.serving, h.waiting = msg, nil
			q.mu.Unlock()
			if msg == nil {
				return
			}
		}
	}()
}

// free waits until a slot is free and returns how many are, or 0 once ctx
// ends. Until add takes them, only add takes slots: as many requests as
// free returned can be added without blocking.
func (q *parentQueue) free(ctx context.Context) int {
	for {
		if n := cap(q.sem) - len(q.sem); n > 0 {
			return n
		}
		select {
		case <-ctx.Done():
			return 0
		case <-q.freed:
		}
	}
}

// each calls fn with every request the queue holds.
func (q *parentQueue) each(fn func(jetstream.Msg)) {
	q.mu.Lock()
	var msgs []jetstream.Msg
	for _, h := range q.parents {
		for _, m := range []jetstream.Msg{h.serving, h.waiting} {
			if m != nil {
				msgs = append(msgs, m)
			}
		}
	}
	q.mu.Unlock()
	for _, m := range msgs {
		fn(m)
	}
}

func (q *parentQueue) wait() { q.inflight.Wait() }
