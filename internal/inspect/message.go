// Package inspect looks into uc's pipeline from outside, for a person
// debugging a controller: where one parent is along the pipeline (Trace),
// the requests no hook could serve (the dead letters: List, Show, Replay),
// and asking the watcher for a sync (Resync). Reading never changes the bus
// or the cluster: messages are read with direct gets, never consumed, and
// nothing is acknowledged. Replay and Resync are the only writes.
package inspect

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go/jetstream"

	"universalcontroller.dev/uc/schemas/bus"
)

// Message is one CloudEvent of the bus, as stored in its stream: a hook
// request, a reply, a failure, or a dead letter.
type Message struct {
	Subject  string `json:"subject"`
	Sequence uint64 `json:"sequence"`
	// Stored is when the stream took it.
	Stored time.Time `json:"stored"`
	ID     string    `json:"id"`
	Type   string    `json:"type"`
	Source string    `json:"source"`
	// Time is the event's time: when it was made.
	Time time.Time `json:"time"`
	// Meta is what the event says about the parent.
	Controller      string `json:"controller"`
	Hook            string `json:"hook"`
	Partition       int    `json:"partition"`
	ParentUID       string `json:"parentUID"`
	Namespace       string `json:"namespace,omitempty"`
	Name            string `json:"name"`
	Generation      int64  `json:"generation"`
	ResourceVersion string `json:"resourceVersion"`
	Observation     int64  `json:"observation"`
	// Revision is the older revision a request is about; empty for the
	// latest.
	Revision string `json:"revision,omitempty"`
	// RequestID, on a reply, is the id of the request it answers.
	RequestID string `json:"requestID,omitempty"`
	// Failure is the data of a failure event: why no reply came.
	Failure *bus.Failure `json:"failure,omitempty"`
	// Plan is the data of a plan: what the applier would do with a reply.
	Plan *bus.Plan `json:"plan,omitempty"`

	meta  bus.Meta
	event *event.Event
}

// Key is the parent's namespace/name.
func (m *Message) Key() string { return Parent{Namespace: m.Namespace, Name: m.Name}.Key() }

// decode reads a stored message of the bus.
func decode(ctx context.Context, raw *jetstream.RawStreamMsg) (*Message, error) {
	e, err := bus.FromMsg(ctx, raw.Subject, raw.Header, raw.Data)
	if err != nil {
		return nil, err
	}
	meta, err := bus.MetaOf(e)
	if err != nil {
		return nil, fmt.Errorf("message %d on %s: %w", raw.Sequence, raw.Subject, err)
	}
	m := &Message{
		Subject: raw.Subject, Sequence: raw.Sequence, Stored: raw.Time,
		ID: e.ID(), Type: e.Type(), Source: e.Source(), Time: e.Time(),
		Controller: meta.Controller, Hook: meta.Hook, Partition: meta.Partition, ParentUID: string(meta.ParentUID),
		Namespace: meta.Namespace, Name: meta.Name, Generation: meta.Generation, ResourceVersion: meta.ResourceVersion,
		Observation: meta.Observation, Revision: meta.Revision, RequestID: meta.RequestID,
		meta: meta, event: e,
	}
	switch e.Type() {
	case bus.FailureType(meta.Hook):
		var f bus.Failure
		if err := json.Unmarshal(e.Data(), &f); err == nil {
			m.Failure = &f
		}
	case bus.PlanType:
		var p bus.Plan
		if err := json.Unmarshal(e.Data(), &p); err == nil {
			m.Plan = &p
		}
	}
	return m, nil
}
