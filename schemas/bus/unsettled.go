package bus

import (
	"context"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// AckWait is how long the bus's consumers wait for a message's ack before
// they deliver it again. It is short so that what a process held when it
// died (SIGKILL, a lost node) comes back within seconds. A process holds a
// message for longer — a slow hook call, a reply queued for its parent's
// turn, an apply — only while it says so: it sends an in-progress ack for
// every message it holds every ProgressEvery (Holder; the Go SDK's worker
// does it for the requests it holds).
const AckWait = 5 * time.Second

// ProgressEvery is how often a process sends in-progress acks for the
// messages it holds: a third of AckWait, so that one late or lost
// heartbeat does not get a message delivered again.
const ProgressEvery = AckWait / 3

// MaxHold bounds how long a Holder keeps a message from being delivered
// again. An apply has a 2-minute deadline and a retry waits at most
// 30 s: a message held longer was forgotten by its holder (a bug), and
// delivering it again gives it a new chance instead of holding it for ever.
const MaxHold = 10 * time.Minute

// Holder keeps track of the messages a process holds — delivered to it and
// neither acked, nacked nor terminated yet — and sends an in-progress ack
// for each of them while Run runs. A message is held from Hold until it is
// settled through the message Hold returns. Messages are told apart by
// stream and stream sequence, as JetStream does: a message delivered again
// is the same message, and settling either delivery settles it.
type Holder struct {
	mu   sync.Mutex
	held map[heldKey]*heldMsg
	now  func() time.Time
}

type heldKey struct {
	stream string
	seq    uint64
}

// heldMsg is a held message's latest delivery.
type heldMsg struct {
	msg       jetstream.Msg
	delivered uint64    // its delivery count
	since     time.Time // when this delivery was held
}

// NewHolder makes a Holder.
func NewHolder() *Holder {
	return &Holder{held: map[heldKey]*heldMsg{}, now: time.Now}
}

// Hold holds msg until it is settled through the message returned. A
// message without JetStream metadata is returned as is, not held.
func (h *Holder) Hold(msg jetstream.Msg) jetstream.Msg {
	md, err := msg.Metadata()
	if err != nil {
		return msg
	}
	key := heldKey{md.Stream, md.Sequence.Stream}
	h.mu.Lock()
	defer h.mu.Unlock()
	m := h.held[key]
	if m == nil || m.delivered != md.NumDelivered {
		m = &heldMsg{delivered: md.NumDelivered, since: h.now()}
		h.held[key] = m
	}
	m.msg = msg
	return &settling{Msg: msg, settled: func() { h.release(key) }}
}

func (h *Holder) release(key heldKey) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.held, key)
}

// Run sends an in-progress ack for every message held, every interval
// (ProgressEvery for the bus's consumers), until ctx ends.
func (h *Holder) Run(ctx context.Context, every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			h.progress()
		}
	}
}

// progress sends an in-progress ack for every message held, and lets go of
// those held longer than MaxHold.
func (h *Holder) progress() {
	now := h.now()
	h.mu.Lock()
	msgs := make([]jetstream.Msg, 0, len(h.held))
	for key, m := range h.held {
		if now.Sub(m.since) > MaxHold {
			delete(h.held, key)
			continue
		}
		msgs = append(msgs, m.msg)
	}
	h.mu.Unlock()
	for _, m := range msgs {
		_ = m.InProgress()
	}
}

// settling is a held message: settling it lets go of it.
type settling struct {
	jetstream.Msg
	settled func()
}

func (s *settling) Ack() error {
	s.settled()
	return s.Msg.Ack()
}

func (s *settling) DoubleAck(ctx context.Context) error {
	s.settled()
	return s.Msg.DoubleAck(ctx)
}

func (s *settling) Nak() error {
	s.settled()
	return s.Msg.Nak()
}

func (s *settling) NakWithDelay(d time.Duration) error {
	s.settled()
	return s.Msg.NakWithDelay(d)
}

func (s *settling) Term() error {
	s.settled()
	return s.Msg.Term()
}

func (s *settling) TermWithReason(reason string) error {
	s.settled()
	return s.Msg.TermWithReason(reason)
}
