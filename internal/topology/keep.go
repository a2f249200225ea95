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

// KeptConsumer is a durable consumer that a role creates and consumes
// itself, and creates again when it is lost: Keep does, or call Check every
// bus.CheckEvery and whenever the onLost callback fires.
type KeptConsumer struct {
	js      jetstream.JetStream
	c       Consumer
	handler jetstream.MessageHandler
	onLost  func()
	lost    chan struct{} // the consumption reported the consumer lost

	mu      sync.Mutex
	cc      jetstream.ConsumeContext
	stopped bool
}

// KeepConsuming creates the durable consumer c (see EnsureConsumer) and
// consumes it with handler. onLost, if not nil and which must not block, is
// called when the consumption reports the consumer may be gone.
func KeepConsuming(ctx context.Context, js jetstream.JetStream, c Consumer, handler jetstream.MessageHandler, onLost func()) (*KeptConsumer, error) {
	k := &KeptConsumer{js: js, c: c, handler: handler, onLost: onLost, lost: make(chan struct{}, 1)}
	if err := k.create(ctx); err != nil {
		return nil, err
	}
	return k, nil
}

// Consumer is the consumer kept.
func (k *KeptConsumer) Consumer() Consumer { return k.c }

// create creates the consumer, or updates it, and consumes it anew.
func (k *KeptConsumer) create(ctx context.Context) error {
	cons, err := EnsureConsumer(ctx, k.js, k.c)
	if err != nil {
		return fmt.Errorf("consumer %s: %w", k.c.Name(), err)
	}
	cc, err := cons.Consume(k.handler, jetstream.PullExpiry(pullExpiry), jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
		if !bus.ConsumerLost(err) {
			return
		}
		select {
		case k.lost <- struct{}{}:
		default:
		}
		if k.onLost != nil {
			k.onLost()
		}
	}))
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
		old.Stop()
	}
	return nil
}

// Check makes sure the consumer exists and is consumed: a consumer that is
// gone is created again, a consumption the server ended is started again.
// It tells whether it had to.
func (k *KeptConsumer) Check(ctx context.Context) (bool, error) {
	_, err := k.js.Consumer(ctx, k.c.Stream, k.c.Name())
	switch {
	case errors.Is(err, jetstream.ErrConsumerNotFound):
	case err != nil:
		return false, fmt.Errorf("consumer %s: %w", k.c.Name(), err)
	case !k.ended():
		return false, nil
	}
	return true, k.create(ctx)
}

// Keep checks the consumer every bus.CheckEvery, and at once when the
// consumption reports it lost, until ctx ends.
func (k *KeptConsumer) Keep(ctx context.Context, log *slog.Logger) {
	tick := time.NewTicker(bus.CheckEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-k.lost:
		}
		recreated, err := k.Check(ctx)
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
	case <-k.cc.Closed():
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
	k.cc.Stop()
}

// Drain stops consuming once the messages delivered are handled, and waits
// for it.
func (k *KeptConsumer) Drain() {
	k.mu.Lock()
	k.stopped = true
	cc := k.cc
	k.mu.Unlock()
	cc.Drain()
	<-cc.Closed()
}
