package hook

import (
	"sync"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// fakeMsg is a request on the subject of one parent.
type fakeMsg struct {
	jetstream.Msg
	subject string
	seq     uint64
	mu      sync.Mutex
	acked   bool
}

func (m *fakeMsg) Subject() string { return m.subject }
func (m *fakeMsg) Metadata() (*jetstream.MsgMetadata, error) {
	return &jetstream.MsgMetadata{Sequence: jetstream.SequencePair{Stream: m.seq}}, nil
}
func (m *fakeMsg) Ack() error { m.mu.Lock(); m.acked = true; m.mu.Unlock(); return nil }

// TestParentQueueCoalesces: requests of a parent that arrive while it is
// being served wait, the newest replacing the others, so the parent gets one
// more call, with the newest request; other parents are not held up.
func TestParentQueueCoalesces(t *testing.T) {
	q := newParentQueue(4)
	gate := make(chan struct{})
	var mu sync.Mutex
	var served []uint64
	serve := func(m jetstream.Msg) {
		f := m.(*fakeMsg)
		if f.seq == 1 {
			<-gate
		}
		mu.Lock()
		served = append(served, f.seq)
		mu.Unlock()
	}
	msgs := []*fakeMsg{{subject: "uc.req.c.sync.0.a", seq: 1}}
	q.add(msgs[0], serve)
	for seq := uint64(2); seq <= 50; seq++ {
		m := &fakeMsg{subject: "uc.req.c.sync.0.a", seq: seq}
		msgs = append(msgs, m)
		q.add(m, serve)
	}
	other := &fakeMsg{subject: "uc.req.c.sync.3.b", seq: 51}
	done := make(chan struct{})
	q.add(other, func(m jetstream.Msg) { serve(m); close(done) })
	<-done // parent b is served while a is held
	close(gate)
	q.wait()
	if len(served) != 3 || served[0] != 51 || served[1] != 1 || served[2] != 50 {
		t.Fatalf("served %v, want [51 1 50]", served)
	}
	for _, m := range msgs[1:49] {
		if !m.acked {
			t.Fatalf("superseded request %d was not acked", m.seq)
		}
	}
}
