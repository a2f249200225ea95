package inspect

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
)

// Bus reads uc's streams, consumers and buckets, and changes none of them:
// messages are read with direct gets (a stream's "get message" API), never
// through a consumer, so nothing is delivered or acknowledged.
type Bus struct {
	js      jetstream.JetStream
	streams map[string]jetstream.Stream
	buckets map[string]jetstream.KeyValue
}

// NewBus reads the bus through js.
func NewBus(js jetstream.JetStream) *Bus {
	return &Bus{js: js, streams: map[string]jetstream.Stream{}, buckets: map[string]jetstream.KeyValue{}}
}

func (b *Bus) stream(ctx context.Context, name string) (jetstream.Stream, error) {
	if s, ok := b.streams[name]; ok {
		return s, nil
	}
	s, err := b.js.Stream(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", name, err)
	}
	b.streams[name] = s
	return s, nil
}

// last is the last message of stream on filter, or nil when it has none.
func (b *Bus) last(ctx context.Context, stream, filter string) (*Message, error) {
	s, err := b.stream(ctx, stream)
	if err != nil {
		return nil, err
	}
	raw, err := s.GetLastMsgForSubject(ctx, filter)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("last message of %s on %s: %w", stream, filter, err)
	}
	return decode(ctx, raw)
}

// each calls fn with every message of stream on filter, oldest first.
func (b *Bus) each(ctx context.Context, stream, filter string, fn func(*jetstream.RawStreamMsg) error) error {
	s, err := b.stream(ctx, stream)
	if err != nil {
		return err
	}
	for seq := uint64(1); ; {
		raw, err := s.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(filter))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("message of %s on %s from %d: %w", stream, filter, seq, err)
		}
		if err := fn(raw); err != nil {
			return err
		}
		seq = raw.Sequence + 1
	}
}

// message is the message of stream with that sequence number.
func (b *Bus) message(ctx context.Context, stream string, seq uint64) (*jetstream.RawStreamMsg, error) {
	s, err := b.stream(ctx, stream)
	if err != nil {
		return nil, err
	}
	raw, err := s.GetMsg(ctx, seq)
	if err != nil {
		return nil, fmt.Errorf("message %d of %s: %w", seq, stream, err)
	}
	return raw, nil
}

// plans reads the parent's last plan of each hook that has one.
func (b *Bus) plans(ctx context.Context, controller string, uid types.UID, hooks ...string) ([]*Message, error) {
	var out []*Message
	for _, hook := range hooks {
		m, err := b.last(ctx, bus.PlanStream, bus.ParentSubjects(bus.PlanPrefix, controller, hook, uid))
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return nil, nil // a dispatcher older than plans made the streams
		}
		if err != nil {
			return nil, err
		}
		if m != nil {
			out = append(out, m)
		}
	}
	return out, nil
}

// Fence is what the fence bucket says of a parent: the last reply applied.
type Fence struct {
	Observation     int64  `json:"observation"`
	Request         string `json:"request"`
	Generation      int64  `json:"generation"`
	ResourceVersion string `json:"resourceVersion"`
	// Applied is when the fence was written: when that reply was applied.
	Applied time.Time `json:"applied"`
}

// fence reads the fence of a parent (its bus.Address.ApplyKey), or nil
// when no reply was applied to it yet.
func (b *Bus) fence(ctx context.Context, key types.UID) (*Fence, error) {
	e, err := b.get(ctx, bus.FenceBucket, string(key))
	if e == nil || err != nil {
		return nil, err
	}
	f, err := bus.ParseFence(e.Value())
	if err != nil {
		return nil, err
	}
	return &Fence{Observation: f.Observation, Request: f.Request, Generation: f.Generation,
		ResourceVersion: f.ResourceVersion, Applied: e.Created()}, nil
}

// holder is the applier replica that holds partition n, or "".
func (b *Bus) holder(ctx context.Context, n int) (string, error) {
	e, err := b.get(ctx, bus.PartitionsBucket, bus.PartitionKey(n))
	if e == nil || err != nil {
		return "", err
	}
	return string(e.Value()), nil
}

// get reads a key of a bucket: nil when the bucket or the key is not
// there (no applier made the bucket yet, or wrote the key).
func (b *Bus) get(ctx context.Context, bucket, key string) (jetstream.KeyValueEntry, error) {
	kv, ok := b.buckets[bucket]
	if !ok {
		var err error
		kv, err = b.js.KeyValue(ctx, bucket)
		if errors.Is(err, jetstream.ErrBucketNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("bucket %s: %w", bucket, err)
		}
		b.buckets[bucket] = kv
	}
	e, err := kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s in bucket %s: %w", key, bucket, err)
	}
	return e, nil
}

// Consumer is the state of a durable consumer.
type Consumer struct {
	Name string `json:"name"`
	// Pending counts the messages it has not delivered yet.
	Pending uint64 `json:"pending"`
	// AckPending counts the messages delivered and not acknowledged yet:
	// served, queued or waiting for a retry.
	AckPending int `json:"ackPending"`
	// Redelivered counts those of them delivered more than once.
	Redelivered int `json:"redelivered"`
	// Waiting counts the pull requests waiting for a message: idle
	// workers (or appliers).
	Waiting int `json:"waiting"`
	// Delivered is the stream sequence of the last message delivered.
	Delivered uint64 `json:"delivered"`
	// LastDelivery is when a message was last delivered.
	LastDelivery *time.Time `json:"lastDelivery,omitempty"`
}

// consumer reads the state of a durable consumer, or nil when it does not
// exist.
func (b *Bus) consumer(ctx context.Context, stream, name string) (*Consumer, error) {
	c, err := b.js.Consumer(ctx, stream, name)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("consumer %s: %w", name, err)
	}
	info := c.CachedInfo()
	return &Consumer{Name: name, Pending: info.NumPending, AckPending: info.NumAckPending, Redelivered: info.NumRedelivered,
		Waiting: info.NumWaiting, Delivered: info.Delivered.Stream, LastDelivery: info.Delivered.Last}, nil
}

// lastPublished asks the active watcher what it last published for the
// parent of controller: an answer with no ID when nothing since it became
// active; with request, the request itself too.
func (b *Bus) lastPublished(ctx context.Context, controller string, parent *unstructured.Unstructured, request bool) (*bus.LastPublished, error) {
	addr := bus.Address{Controller: controller, Hook: hooks.Sync, ParentUID: parent.GetUID()}
	q := bus.Question{Namespace: parent.GetNamespace(), Name: parent.GetName(), Request: request}
	var answer bus.LastPublished
	if err := askWatcher(ctx, b.js.Conn(), addr.InspectSubject(), q, &answer); err != nil {
		return nil, err
	}
	if answer.Error != "" {
		return nil, fmt.Errorf("the watcher: %s", answer.Error)
	}
	return &answer, nil
}
