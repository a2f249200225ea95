package inspect

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/types"

	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/sdk/go/hook"
)

// DeadLetter is a request no hook could serve within its maximum
// deliveries, kept in UC_DEADLETTER (for 7 days).
type DeadLetter struct {
	// ID is its sequence number in UC_DEADLETTER: what uc dlq show and
	// uc dlq replay take.
	ID uint64 `json:"id"`
	// DeadLettered is when the worker that gave up put it there.
	DeadLettered time.Time `json:"deadLettered"`
	// Reason and Message say why the last delivery failed.
	Reason  string `json:"reason"`
	Message string `json:"message"`
	// Request is the request as uc published it. Nil when the dead letter
	// is no uc request (Problem says why).
	Request *Message `json:"request,omitempty"`
	Problem string   `json:"problem,omitempty"`
	// Superseded: a reply of this observation of the parent, or of a
	// later one, was applied since; replaying it changes nothing.
	Superseded bool `json:"superseded"`
	// Data is the request's body, in Show only.
	Data json.RawMessage `json:"data,omitempty"`
}

// Subject is the dead letter's subject.
func (d *DeadLetter) Subject() string {
	if d.Request == nil {
		return ""
	}
	return d.Request.Subject
}

// DeadLetters lists the dead letters of a controller, or of every
// controller when controller is "", the oldest first.
func (b *Bus) DeadLetters(ctx context.Context, controller string) ([]*DeadLetter, error) {
	return b.deadLetters(ctx, bus.ControllerSubjects(bus.DeadLetterPrefix, controller))
}

// deadLetters lists the dead letters on filter, the oldest first, each
// told superseded or not by its parent's fence.
func (b *Bus) deadLetters(ctx context.Context, filter string) ([]*DeadLetter, error) {
	var out []*DeadLetter
	err := b.each(ctx, bus.DeadLetterStream, filter, func(raw *jetstream.RawStreamMsg) error {
		out = append(out, deadLetterOf(ctx, raw))
		return nil
	})
	if err != nil {
		return nil, err
	}
	fences := map[types.UID]*Fence{}
	for _, d := range out {
		if d.Request == nil {
			continue
		}
		key := d.Request.meta.ApplyKey()
		f, ok := fences[key]
		if !ok {
			if f, err = b.fence(ctx, key); err != nil {
				return nil, err
			}
			fences[key] = f
		}
		d.Superseded = f != nil && f.Observation >= d.Request.Observation
	}
	return out, nil
}

// DeadLetter reads the dead letter of that id, with its request's body.
func (b *Bus) DeadLetter(ctx context.Context, id uint64) (*DeadLetter, error) {
	raw, err := b.message(ctx, bus.DeadLetterStream, id)
	if err != nil {
		return nil, err
	}
	d := deadLetterOf(ctx, raw)
	if d.Request != nil {
		d.Data = d.Request.event.Data()
		f, err := b.fence(ctx, d.Request.meta.ApplyKey())
		if err != nil {
			return nil, err
		}
		d.Superseded = f != nil && f.Observation >= d.Request.Observation
	}
	return d, nil
}

// deadLetterOf reads a stored dead letter.
func deadLetterOf(ctx context.Context, raw *jetstream.RawStreamMsg) *DeadLetter {
	d := &DeadLetter{ID: raw.Sequence, DeadLettered: raw.Time,
		Reason: raw.Header.Get(hook.HeaderFailureReason), Message: raw.Header.Get(hook.HeaderFailureMessage)}
	m, err := decode(ctx, raw)
	if err != nil {
		d.Problem = err.Error()
		return d
	}
	d.Request = m
	return d
}

// Replayed says what replaying one dead letter did.
type Replayed struct {
	// ID is the dead letter's.
	ID     uint64 `json:"id"`
	Parent string `json:"parent"`
	Hook   string `json:"hook"`
	// Request is the id of the request published again; empty when the
	// dead letter was skipped.
	Request string `json:"request,omitempty"`
	// Skipped says why it was not replayed.
	Skipped string `json:"skipped,omitempty"`
	// Note is something to know about a replay.
	Note string `json:"note,omitempty"`
}

// What a replay can say.
const (
	skippedWaiting    = "a request for the parent is waiting in UC_REQUESTS: it is at least as new, and the hook gets it"
	skippedSuperseded = "superseded: a reply of this observation of the parent, or of a later one, was applied since"
	skippedOlder      = "a later dead letter of the same parent and hook is replayed"
	noteSuperseded    = "superseded: the hook is called, and the fence drops its reply: a newer observation of the parent was applied"
)

// Replay publishes the request of one dead letter again, with a new id
// and its observation unchanged, so that the parent's fence still keeps
// its reply from undoing anything newer; then deletes the dead letter. A
// request for the parent already waiting is newer: then nothing is
// published.
func (b *Bus) Replay(ctx context.Context, id uint64) (Replayed, error) {
	d, err := b.DeadLetter(ctx, id)
	if err != nil {
		return Replayed{}, err
	}
	if d.Request == nil {
		return Replayed{}, fmt.Errorf("dead letter %d cannot be replayed: %s", id, d.Problem)
	}
	r, err := b.replay(ctx, d)
	if err == nil && r.Request != "" && d.Superseded {
		r.Note = noteSuperseded
	}
	return r, err
}

// ReplayController replays the dead letters of a controller that are not
// superseded, for each parent and hook the latest one only.
func (b *Bus) ReplayController(ctx context.Context, controller string) ([]Replayed, error) {
	all, err := b.DeadLetters(ctx, controller)
	if err != nil {
		return nil, err
	}
	replay, out := selectReplays(all)
	for _, d := range replay {
		r, err := b.replay(ctx, d)
		if err != nil {
			return out, err
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b Replayed) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// selectReplays chooses the dead letters to replay: for each subject (a
// parent's hook and revision) the one of the latest observation, unless
// it is superseded. It says why it skips the others.
func selectReplays(all []*DeadLetter) (replay []*DeadLetter, skipped []Replayed) {
	latest := map[string]*DeadLetter{}
	for _, d := range all {
		if d.Request == nil {
			skipped = append(skipped, Replayed{ID: d.ID, Skipped: d.Problem})
			continue
		}
		l := latest[d.Subject()]
		if l == nil || d.Request.Observation > l.Request.Observation ||
			d.Request.Observation == l.Request.Observation && d.ID > l.ID {
			latest[d.Subject()] = d
		}
	}
	for _, d := range all {
		switch l := latest[d.Subject()]; {
		case d.Request == nil:
		case d != l:
			skipped = append(skipped, skip(d, skippedOlder))
		case d.Superseded:
			skipped = append(skipped, skip(d, skippedSuperseded))
		default:
			replay = append(replay, d)
		}
	}
	return replay, skipped
}

func skip(d *DeadLetter, why string) Replayed {
	return Replayed{ID: d.ID, Parent: d.Request.Key(), Hook: d.Request.Hook, Skipped: why}
}

// replay publishes a dead letter's request again, unless a request for
// the parent is waiting, and deletes the dead letter.
func (b *Bus) replay(ctx context.Context, d *DeadLetter) (Replayed, error) {
	r := Replayed{ID: d.ID, Parent: d.Request.Key(), Hook: d.Request.Hook}
	e := d.Request.event.Clone() // its trace context too: the replay goes on with the request's trace
	e.SetID(replayID(e.ID()))
	e.SetTime(time.Now())
	msg, err := bus.ToMsg(ctx, d.Request.meta.RequestSubject(), &e)
	if err != nil {
		return r, err
	}
	// Only if the parent has no request waiting: one waiting is newer,
	// and the stream keeps one per parent, so this one would replace it.
	_, err = b.js.PublishMsg(ctx, msg, jetstream.WithMsgID(e.ID()), jetstream.WithExpectLastSequencePerSubject(0))
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant) {
		r.Skipped = skippedWaiting
		return r, nil
	}
	if err != nil {
		return r, fmt.Errorf("publish the request of dead letter %d again: %w", d.ID, err)
	}
	r.Request = e.ID()
	s, err := b.stream(ctx, bus.DeadLetterStream)
	if err == nil {
		err = s.DeleteMsg(ctx, d.ID)
	}
	if err != nil {
		r.Note = fmt.Sprintf("replayed, but still in %s: %v", bus.DeadLetterStream, err)
	}
	return r, nil
}

// replaySuffix marks the id of a request published again from a dead
// letter: "<its id>-replay-<random>".
const replaySuffix = "-replay-"

// replayID is a new id for a request published again: the original's
// (without the mark of an earlier replay) and a random part. Its first
// part, the hash of what the request observed, stays (see
// watcher/ids.go).
func replayID(id string) string {
	base, _, _ := strings.Cut(id, replaySuffix)
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return base + replaySuffix + hex.EncodeToString(b)
}
