package bus

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// fakeMsg is one delivery of a stream message; it counts its in-progress
// acks.
type fakeMsg struct {
	jetstream.Msg
	seq, delivered uint64
	progress       int
}

func (m *fakeMsg) Metadata() (*jetstream.MsgMetadata, error) {
	md := &jetstream.MsgMetadata{Stream: "S", NumDelivered: m.delivered}
	md.Sequence.Stream = m.seq
	return md, nil
}

func (m *fakeMsg) InProgress() error { m.progress++; return nil }
func (m *fakeMsg) Ack() error        { return nil }

// delivery is one delivery of message seq, tracked at start+at, settled at
// once when ack.
type delivery struct {
	seq, delivered uint64
	at             time.Duration
	ack            bool
}

// TestUnsettledProgress: which deliveries an Unsettled's round of
// heartbeats covers.
func TestUnsettledProgress(t *testing.T) {
	start := time.Now()
	tests := []struct {
		name       string
		deliveries []delivery    // in order
		round      time.Duration // the heartbeat round's time, after start
		want       []int         // in-progress acks of each delivery
	}{{
		name:       "unsettled messages get one each",
		deliveries: []delivery{{1, 1, 0, false}, {2, 1, 0, false}},
		round:      time.Second, want: []int{1, 1},
	}, {
		name:       "a settled message gets none",
		deliveries: []delivery{{1, 1, 0, true}, {2, 1, 0, false}},
		round:      time.Second, want: []int{0, 1},
	}, {
		name:       "a message delivered again is one message: its latest delivery gets it",
		deliveries: []delivery{{1, 1, 0, false}, {1, 2, time.Second, false}},
		round:      2 * time.Second, want: []int{0, 1},
	}, {
		name:       "settling the first delivery settles the message",
		deliveries: []delivery{{1, 2, 0, false}, {1, 2, 0, true}},
		round:      time.Second, want: []int{0, 0},
	}, {
		name:       "a message unsettled longer than MaxInProgress is let go",
		deliveries: []delivery{{1, 1, 0, false}, {2, 1, MaxInProgress, false}},
		round:      MaxInProgress + time.Second, want: []int{0, 1},
	}, {
		name:       "a new delivery is tracked anew",
		deliveries: []delivery{{1, 1, 0, false}, {1, 2, MaxInProgress, false}},
		round:      MaxInProgress + time.Second, want: []int{0, 1},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u := NewUnsettled()
			var msgs []*fakeMsg
			for _, d := range tc.deliveries {
				u.now = func() time.Time { return start.Add(d.at) }
				m := &fakeMsg{seq: d.seq, delivered: d.delivered}
				msgs = append(msgs, m)
				tracked := u.Track(m)
				if d.ack {
					_ = tracked.Ack()
				}
			}
			u.now = func() time.Time { return start.Add(tc.round) }
			u.progress()
			for i, m := range msgs {
				if m.progress != tc.want[i] {
					t.Errorf("delivery %d (seq %d, #%d): %d in-progress acks, want %d", i, m.seq, m.delivered, m.progress, tc.want[i])
				}
			}
		})
	}
}
