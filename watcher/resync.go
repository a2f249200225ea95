package watcher

import (
	"sync"
	"time"
)

// A resync asks for a parent's request even when nothing changed since the
// last one (resyncPeriodSeconds, resyncAfterSeconds, uc resync, a
// republish): it is forced (see requestChain), where other requests of an
// unchanged parent are dropped by the bus as duplicates. The queue's key
// names the parent only, so that a parent is one item, and the workqueue
// never syncs it in two workers at once, resync or not. A resync that is due
// marks its parent in Watcher.resyncs and queues it: the parent's next sync
// takes the mark and serves the resync (syncTraced). A resync asked for
// later waits in Watcher.laterResyncs until it is due, so that the syncs
// before it are not resyncs.

// resyncSet is the parents with a resync due that no sync served yet. Its
// zero value is empty and ready.
type resyncSet struct {
	mu   sync.Mutex
	keys map[parentKey]struct{}
}

// add marks the parent's resync due.
func (s *resyncSet) add(key parentKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.keys == nil {
		s.keys = map[parentKey]struct{}{}
	}
	s.keys[key] = struct{}{}
}

// take tells whether the parent has a resync due, and clears it: the sync
// that takes it serves it.
func (s *resyncSet) take(key parentKey) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, due := s.keys[key]
	delete(s.keys, key)
	return due
}

// resyncAfter resyncs the parent after a delay: the first sync of it once
// the delay is over is a resync. Of several resyncs of a parent waiting,
// the first to fall due is kept (as workqueue.DelayingInterface does).
func (w *Watcher) resyncAfter(key parentKey, after time.Duration) {
	if after > 0 {
		w.laterResyncs.AddAfter(key, after)
		return
	}
	w.resyncs.add(key)
	w.queue.Add(key)
}

// queueSync queues a parent's sync after a delay, a resync if resync.
func (w *Watcher) queueSync(key parentKey, resync bool, after time.Duration) {
	if resync {
		w.resyncAfter(key, after)
		return
	}
	w.queue.AddAfter(key, after)
}

// queueDueResyncs queues the resyncs of laterResyncs as they fall due,
// until it shuts down.
func (w *Watcher) queueDueResyncs() {
	for {
		key, quit := w.laterResyncs.Get()
		if quit {
			return
		}
		w.resyncAfter(key, 0)
		w.laterResyncs.Done(key)
	}
}
