package topology

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"universalcontroller.dev/uc/schemas/bus"
)

// pullExpiry bounds each pull request of a kept consumer. The server hands
// the messages it delivers — new ones, and those redelivered after
// bus.AckWait — to the pull requests waiting, and a process that is paused
// (a long GC, a frozen VM, SIGSTOP) leaves its own waiting: with nats.go's
// 30 s default, the messages of a partition that another replica took
// over kept going to the paused one for up to 30 s. Its pulls now end
// within AckWait, as its messages' acks do.
const pullExpiry = bus.AckWait

// pullHeartbeat is how often the server tells a kept consumer's waiting
// pull that it is still there. nats.go's iterator sends its next pull when
// Next finds none pending, unless the previous pull is still being sent:
// a message answered and handled within that moment (a busy machine, an
// in-process server) leaves the iterator with no pull at the server, and
// only two missed heartbeats make it pull again: at nats.go's default
// heartbeat, half the expiry, that took AckWait. A partition's replies
// waited 5 s in the stream, a few dozen per burst of 1,000 parents; with
// this heartbeat, at most a second.
const pullHeartbeat = 500 * time.Millisecond

// KeptConsumer is a durable consumer that a role creates and consumes
// itself, and creates again when it is lost: Keep does, or call Check every
// bus.CheckEvery and whenever the onLost callback fires.
type KeptConsumer struct {
	js         jetstream.JetStream
	c          Consumer
	handler    jetstream.MessageHandler
	onLost     func()
	displacing Displacing
	ahead      int           // messages pulled ahead of the handler; 0: nats.go's default
	lost       chan struct{} // the consumption reported the consumer lost

	mu      sync.Mutex
	cc      *consumption
	stopped bool
}

// KeepOption configures KeepConsuming.
type KeepOption func(*KeptConsumer)

// PullAhead bounds the messages the consumption pulls ahead of its
// handler to n: a handler that blocks — an intake waiting for room —
// then holds back the consumer's delivery, leaving the messages in the
// stream rather than in the process. Those pulled ahead wait unacknowledged
// while it blocks (the server delivers them again after their ack wait),
// so n is small.
func PullAhead(n int) KeepOption { return func(k *KeptConsumer) { k.ahead = n } }

// Displacing are the consumers a kept consumer takes the place of: those
// of its work-queue stream whose filters overlap its own, left by another
// configuration of its role (its Role's Deletes: the one watcher's
// consumer and the sharded watchers' of each partition). The server
// refuses to create a consumer beside them; the kept consumer then deletes
// them, saying which to Log, and is created again. What they had not
// acknowledged stays in the stream, a work queue, for it.
//
// While processes of both configurations run (a rolling change of flags),
// each deletes the other's consumers to create its own. KeepDisplacing
// displaces when it creates the consumer, and Keep at most every
// bus.CheckEvery, never on the consumption's report that its consumer was
// deleted: the two take the stream in turn rather than delete each
// other's at the pace of the network, and once the last process of the
// other configuration is gone, the next check creates the consumer for
// good.
type Displacing struct {
	Consumers []Consumer
	Log       *slog.Logger
}

// KeepConsuming creates the durable consumer c (see EnsureConsumer) and
// consumes it with handler, one message at a time. onLost, if not nil and
// which must not block, is called when the consumption reports the
// consumer may be gone.
func KeepConsuming(ctx context.Context, js jetstream.JetStream, c Consumer, handler jetstream.MessageHandler, onLost func(), opts ...KeepOption) (*KeptConsumer, error) {
	return KeepDisplacing(ctx, js, c, Displacing{}, handler, onLost, opts...)
}

// KeepDisplacing is KeepConsuming for a consumer that takes the place of
// others (see Displacing).
func KeepDisplacing(ctx context.Context, js jetstream.JetStream, c Consumer, d Displacing, handler jetstream.MessageHandler, onLost func(), opts ...KeepOption) (*KeptConsumer, error) {
	k := &KeptConsumer{js: js, c: c, handler: handler, onLost: onLost, displacing: d, lost: make(chan struct{}, 1)}
	for _, opt := range opts {
		opt(k)
	}
	if err := k.create(ctx, true); err != nil {
		return nil, err
	}
	return k, nil
}

// Consumer is the consumer kept.
func (k *KeptConsumer) Consumer() Consumer { return k.c }

// create creates the consumer, or updates it, and consumes it anew. If
// displace, a creation refused because of the consumers it takes the place
// of deletes them and tries again.
func (k *KeptConsumer) create(ctx context.Context, displace bool) error {
	cons, err := EnsureConsumer(ctx, k.js, k.c)
	if displace && overlaps(err) && len(k.displacing.Consumers) > 0 {
		cons, err = k.displace(ctx, err)
	}
	if err != nil {
		return fmt.Errorf("consumer %s: %w", k.c.Name(), err)
	}
	cc, err := k.consume(cons)
	if err != nil {
		return fmt.Errorf("consume %s: %w", k.c.Name(), err)
	}
	k.mu.Lock()
	old := k.cc
	if k.stopped {
		old = cc // stopped meanwhile
	} else {
		k.cc = cc
	}
	k.mu.Unlock()
	if old != nil {
		old.msgs.Stop()
	}
	return nil
}

// consumption is one consumption of a kept consumer: a goroutine hands
// the messages an iterator pulls to the handler, one after the other.
type consumption struct {
	msgs jetstream.MessagesContext
	done chan struct{} // closed once the goroutine returned
}

// consume starts consuming cons.
func (k *KeptConsumer) consume(cons jetstream.Consumer) (*consumption, error) {
	opts := []jetstream.PullMessagesOpt{jetstream.PullExpiry(pullExpiry), jetstream.PullHeartbeat(pullHeartbeat),
		jetstream.WithMessagesErrOnMissingHeartbeat(true)}
	if k.ahead > 0 {
		opts = append(opts, jetstream.PullMaxMessages(k.ahead))
	}
	msgs, err := cons.Messages(opts...)
	if err != nil {
		return nil, err
	}
	c := &consumption{msgs: msgs, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		for {
			msg, err := msgs.Next()
			switch {
			case errors.Is(err, jetstream.ErrMsgIteratorClosed):
				return // stopped, drained, or ended by the server (its consumer deleted)
			case err != nil:
				if bus.ConsumerLost(err) {
					k.reportLost()
				}
			default:
				k.handler(msg)
			}
		}
	}()
	return c, nil
}

// reportLost tells Keep, and onLost, that the consumption reported its
// consumer may be gone.
func (k *KeptConsumer) reportLost() {
	select {
	case k.lost <- struct{}{}:
	default:
	}
	if k.onLost != nil {
		k.onLost()
	}
}

// displace deletes the consumers k's takes the place of, the server having
// refused k's because of one of them, and creates it again.
func (k *KeptConsumer) displace(ctx context.Context, refused error) (jetstream.Consumer, error) {
	deleted, err := deleteConsumers(ctx, k.js, k.displacing.Consumers)
	if len(deleted) > 0 {
		k.displacing.Log.Info("deleted consumers that overlap this one on the work-queue stream",
			"stream", k.c.Stream, "consumer", k.c.Name(), "deleted", deleted)
	}
	if err != nil {
		return nil, fmt.Errorf("%w; deleting the consumers it takes the place of: %w", refused, err)
	}
	cons, err := EnsureConsumer(ctx, k.js, k.c)
	if overlaps(err) {
		return nil, fmt.Errorf("%w, after deleting the consumers it takes the place of: another consumer of %s overlaps it, or one of those was created again meanwhile", err, k.c.Stream)
	}
	return cons, err
}

// Check makes sure the consumer exists and is consumed: a consumer that is
// gone is created again, a consumption the server ended is started again,
// displacing the consumers it takes the place of (Displacing). It tells
// whether it had to.
func (k *KeptConsumer) Check(ctx context.Context) (bool, error) {
	return k.check(ctx, true)
}

func (k *KeptConsumer) check(ctx context.Context, displace bool) (bool, error) {
	_, err := k.js.Consumer(ctx, k.c.Stream, k.c.Name())
	switch {
	case errors.Is(err, jetstream.ErrConsumerNotFound):
	case err != nil:
		return false, fmt.Errorf("consumer %s: %w", k.c.Name(), err)
	case !k.ended():
		return false, nil
	}
	return true, k.create(ctx, displace)
}

// Keep checks the consumer every bus.CheckEvery, and at once when the
// consumption reports it lost, until ctx ends. Only the periodic checks
// displace (see Displacing).
func (k *KeptConsumer) Keep(ctx context.Context, log *slog.Logger) {
	tick := time.NewTicker(bus.CheckEvery)
	defer tick.Stop()
	for {
		displace := false
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			displace = true
		case <-k.lost:
		}
		recreated, err := k.check(ctx, displace)
		switch {
		case err != nil && ctx.Err() == nil:
			log.Warn("check consumer", "consumer", k.c.Name(), "err", err)
		case recreated:
			log.Warn("consumer was gone or no longer consumed; consuming it again", "consumer", k.c.Name())
		}
	}
}

// ended tells a consumption the server ended (it deleted the consumer),
// unless this side stopped it.
func (k *KeptConsumer) ended() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.stopped {
		return false
	}
	select {
	case <-k.cc.done:
		return true
	default:
		return false
	}
}

// Stop stops consuming, dropping the messages delivered and not handled
// yet: the server delivers them again.
func (k *KeptConsumer) Stop() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.stopped = true
	k.cc.msgs.Stop()
}

// Drain stops consuming once the messages delivered are handled, and waits
// for it.
func (k *KeptConsumer) Drain() {
	k.mu.Lock()
	k.stopped = true
	cc := k.cc
	k.mu.Unlock()
	cc.msgs.Drain()
	<-cc.done
}
