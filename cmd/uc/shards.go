package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"universalcontroller.dev/uc/internal/shares"
	"universalcontroller.dev/uc/internal/topology"
)

// Sharded watchers (--shard-watchers). Each uc watcher replica holds some
// of the partitions, as the appliers do (internal/shares, in buckets of
// the watchers' own), and watches only their parents, children and
// revisions: its informers select the partitions' label on the API server
// (registry.WithPartitions), so a replica holding 1/N of the partitions
// holds about 1/N of the objects. Each time the partitions a replica holds
// change, it begins a new term, as a leader elected anew does: the
// registry and the watcher of the last term stop, and a registry over the
// new partitions fills its caches before a new watcher publishes. A
// partition handed over is released only once the term that watched it
// has ended; a term publishes while it holds every one of its partitions.

// settle is how long the partitions held stay the same before a term
// begins over them.
const settle = 200 * time.Millisecond

// shardTerms runs the terms of one watcher replica, and is its Holder.
type shardTerms struct {
	// run is one term over partitions, publishing while lease is nil.
	run     func(ctx context.Context, partitions []int, lease func() error) error
	log     *slog.Logger
	changed chan struct{}

	mu   sync.Mutex
	held map[int]*shares.Hold
	// The term running: its partitions, its end and when it is over.
	term     []int
	stop     context.CancelFunc
	finished chan struct{}
}

func newShardTerms(run func(context.Context, []int, func() error) error, log *slog.Logger) *shardTerms {
	return &shardTerms{run: run, log: log, changed: make(chan struct{}, 1), held: map[int]*shares.Hold{}}
}

// Take adds n to the next term.
func (s *shardTerms) Take(_ context.Context, n int, hold *shares.Hold) error {
	s.mu.Lock()
	s.held[n] = hold
	s.mu.Unlock()
	s.signal()
	return nil
}

// Renewed needs nothing: a term checks its holds before each publish.
func (s *shardTerms) Renewed(context.Context, int) {}

// Give ends the term that watches n, if one does, and returns once it has
// ended; the next term does without n.
func (s *shardTerms) Give(n int) {
	s.mu.Lock()
	delete(s.held, n)
	stop, finished := s.stop, s.finished
	watching := slices.Contains(s.term, n)
	s.mu.Unlock()
	if watching {
		stop()
		<-finished
	}
	s.signal()
}

func (s *shardTerms) signal() {
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

// loop begins a term each time the partitions held change, until ctx ends.
func (s *shardTerms) loop(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			s.end()
			return nil
		case <-s.changed:
		}
		// A balance takes partitions one by one: the term begins once they
		// stop coming, not once per partition.
		for settled := false; !settled; {
			select {
			case <-ctx.Done():
				s.end()
				return nil
			case <-s.changed:
			case <-time.After(settle):
				settled = true
			}
		}
		s.mu.Lock()
		partitions := slices.Sorted(maps.Keys(s.held))
		same := slices.Equal(partitions, s.term)
		s.mu.Unlock()
		if same {
			continue
		}
		s.end()
		if len(partitions) == 0 {
			continue
		}
		s.begin(ctx, partitions)
	}
}

// begin begins a term over partitions, unless one of them was given back
// meanwhile (its change is signalled: the loop goes round again).
func (s *shardTerms) begin(ctx context.Context, partitions []int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	holds := make([]*shares.Hold, 0, len(partitions))
	for _, n := range partitions {
		h, ok := s.held[n]
		if !ok {
			return
		}
		holds = append(holds, h)
	}
	lease := func() error {
		for i, h := range holds {
			if err := h.Check(); err != nil {
				return fmt.Errorf("partition %d: %w", partitions[i], err)
			}
		}
		return nil
	}
	term, stop := context.WithCancel(ctx)
	finished := make(chan struct{})
	s.term, s.stop, s.finished = partitions, stop, finished
	s.log.Info("watching partitions", "partitions", partitions, "at", time.Now().UnixNano())
	go func() {
		defer close(finished)
		if err := s.run(term, partitions, lease); err != nil && !errors.Is(err, context.Canceled) {
			s.log.Error("watcher term", "partitions", partitions, "err", err)
		}
		s.log.Info("stopped watching partitions", "partitions", partitions, "at", time.Now().UnixNano())
	}()
}

// end ends the running term, if any, and waits for it.
func (s *shardTerms) end() {
	s.mu.Lock()
	stop, finished := s.stop, s.finished
	s.term, s.stop, s.finished = nil, nil, nil
	s.mu.Unlock()
	if stop != nil {
		stop()
		<-finished
	}
}

// shardedWatcher runs one watcher replica of an installation whose
// watchers are sharded: term runs the watcher of each term.
func shardedWatcher(js jetstream.JetStream, cfg config, id string, term func(context.Context, []int, func() error) error, log *slog.Logger) func(context.Context) error {
	return func(ctx context.Context) error {
		terms := newShardTerms(term, log.With("component", "shards"))
		var sh *shares.Shares
		err := retryUntil(ctx, 2*time.Minute, log, "create the watcher shards' buckets", func(attempt context.Context) (err error) {
			sh, err = shares.New(attempt, js, terms, shares.Options{
				Partitions: cfg.partitions, Replicas: cfg.replicas, ReplicaID: id,
				Members: topology.Watchers, Keys: topology.WatcherPartitions, Role: "watcher",
			}, log)
			return err
		})
		if err != nil {
			return fmt.Errorf("watcher shards: %w", err)
		}
		go sh.Run(ctx)
		return terms.loop(ctx)
	}
}
