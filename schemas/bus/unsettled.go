package bus

import (
	"context"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// AckWait is how long the bus's consumers wait for a message's ack before
// they deliver it again. It is short so that what a process had not settled
// when it died (SIGKILL, a lost node) comes back within seconds. A process
// keeps a message for longer — a slow hook call, a reply queued for its
// parent's turn, an apply — only while it says so: it sends an in-progress
// ack for every message it has not settled every ProgressEvery (Unsettled;
// the Go SDK's worker does it for the requests it has in hand).
const AckWait = 5 * time.Second

// ProgressEvery is how often a process sends in-progress acks for the
// messages it has not settled: a third of AckWait, so that one late or lost
// heartbeat does not get a message delivered again.
const ProgressEvery = AckWait / 3

// MaxInProgress bounds how long an Unsettled keeps a message from being
// delivered again. An apply has a 2-minute deadline and a retry waits at
// most 30 s: a message unsettled longer was forgotten by its process (a
// bug), and delivering it again gives it a new chance instead of keeping it
// for ever.
const MaxInProgress = 10 * time.Minute

// Unsettled keeps track of the messages a process has not settled —
// delivered to it and neither acked, nacked nor terminated yet — and sends
// an in-progress ack for each of them while Run runs. A message is tracked
// from Track until it is settled through the message Track returns.
// Messages are told apart by stream and stream sequence, as JetStream does:
// a message delivered again is the same message, and settling either
// delivery settles it.
type Unsettled struct {
	mu   sync.Mutex
	msgs map[msgKey]*unsettledMsg
	now  func() time.Time
}

type msgKey struct {
	stream string
	seq    uint64
}

// unsettledMsg is an unsettled message's latest delivery.
type unsettledMsg struct {
	msg       jetstream.Msg
	delivered uint64    // its delivery count
	since     time.Time // when this delivery was tracked
}

// NewUnsettled makes an Unsettled.
func NewUnsettled() *Unsettled {
	return &Unsettled{msgs: map[msgKey]*unsettledMsg{}, now: time.Now}
}

// Track tracks msg until it is settled through the message returned. A
// message without JetStream metadata is returned as is, not tracked.
func (u *Unsettled) Track(msg jetstream.Msg) jetstream.Msg {
	md, err := msg.Metadata()
	if err != nil {
		return msg
	}
	key := msgKey{md.Stream, md.Sequence.Stream}
	u.mu.Lock()
	defer u.mu.Unlock()
	m := u.msgs[key]
	if m == nil || m.delivered != md.NumDelivered {
		m = &unsettledMsg{delivered: md.NumDelivered, since: u.now()}
		u.msgs[key] = m
	}
	m.msg = msg
	return &settling{Msg: msg, settled: func() { u.forget(key) }}
}

func (u *Unsettled) forget(key msgKey) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.msgs, key)
}

// Run sends an in-progress ack for every message unsettled, every interval
// (ProgressEvery for the bus's consumers), until ctx ends.
func (u *Unsettled) Run(ctx context.Context, every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			u.progress()
		}
	}
}

// progress sends an in-progress ack for every message unsettled, and lets
// go of those unsettled longer than MaxInProgress.
func (u *Unsettled) progress() {
	now := u.now()
	u.mu.Lock()
	msgs := make([]jetstream.Msg, 0, len(u.msgs))
	for key, m := range u.msgs {
		if now.Sub(m.since) > MaxInProgress {
			delete(u.msgs, key)
			continue
		}
		msgs = append(msgs, m.msg)
	}
	u.mu.Unlock()
	for _, m := range msgs {
		_ = m.InProgress()
	}
}

// settling is an unsettled message: settling it lets go of it.
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
