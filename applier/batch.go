package applier

import (
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/trace"

	"universalcontroller.dev/uc/schemas/bus"
)

// reply is one hook reply received from the bus.
type reply struct {
	msg  jetstream.Msg
	meta bus.Meta
	typ  string
	data []byte
	sent time.Time         // when the hook sent it; zero once its wait is traced
	span trace.SpanContext // of the hook call that sent it (its ce-traceparent)
}

// batch is what is applied for one parent at once: the replies computed from
// one observation. That is one reply, or, for a controller that rolls its
// children out, one reply per revision the watcher asked the hook about
// (meta.Revisions), the latest first.
type batch struct {
	meta    bus.Meta          // of the latest revision's reply, once it came
	replies map[string]*reply // by revision hash ("" without revisions)
}

func newBatch(meta bus.Meta) *batch {
	return &batch{meta: meta, replies: map[string]*reply{}}
}

// add keeps r in the batch and returns the reply it replaces, if any.
func (b *batch) add(r *reply) (replaced *reply) {
	rev := r.meta.ThisRevision()
	replaced = b.replies[rev]
	b.replies[rev] = r
	if rev == r.meta.LatestRevision() {
		b.meta = r.meta
	}
	return replaced
}

// complete tells a batch with a reply for every revision asked about.
func (b *batch) complete() bool {
	for _, rev := range b.revisions() {
		if b.replies[rev] == nil {
			return false
		}
	}
	return true
}

func (b *batch) revisions() []string {
	if len(b.meta.Revisions) == 0 {
		return []string{""}
	}
	return b.meta.Revisions
}

// latest is the reply of the parent's latest revision.
func (b *batch) latest() *reply { return b.replies[b.meta.LatestRevision()] }

// each calls fn with every message of the batch.
func (b *batch) each(fn func(jetstream.Msg)) {
	for _, r := range b.replies {
		fn(r.msg)
	}
}

func ack(m jetstream.Msg)        { _ = m.Ack() }
func nak(m jetstream.Msg)        { _ = m.Nak() }
func inProgress(m jetstream.Msg) { _ = m.InProgress() }

// failure returns a failure event of the batch, the latest revision's first,
// or nil.
func (b *batch) failure() *reply {
	for _, rev := range b.revisions() {
		if r := b.replies[rev]; r != nil && r.typ == bus.FailureType(r.meta.Hook) {
			return r
		}
	}
	return nil
}
