package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/google/uuid"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"universalcontroller.dev/uc/internal/registry"
	"universalcontroller.dev/uc/internal/topology"
	"universalcontroller.dev/uc/watcher"
)

// The watcher's lease. A standby takes over a watcher that died (SIGKILL, a
// lost node) within leaseDuration after its last renewal, plus up to
// retryPeriod (jittered) until it tries again: about 7 s, where client-go's
// usual 15 s lease stalled every controller for 18 s. The leader renews
// every retryPeriod and gives up leading when it could not renew for
// renewDeadline, well before a standby may take the lease: four tries
// against a slow apiserver.
const (
	leaseDuration = 6 * time.Second
	renewDeadline = 4 * time.Second
	retryPeriod   = time.Second
)

// errNotLeading is a leader's lease that may have lapsed.
var errNotLeading = errors.New("this watcher does not hold the lease")

// term is what one term of leading runs: fn, given lease, which tells at
// any moment whether the term still lasts (nil) or not.
type term func(ctx context.Context, lease func() error) error

// leaderElected runs fn only while this process holds the Lease
// namespace/name, so that one watcher is active however many run. A term
// ends when the lease is lost — not renewed for renewDeadline, as when the
// process was paused or the apiserver was unreachable: the process then
// stands by again, its caches warm, and may lead again later. It returns
// nil when ctx ends, and fn's error if fn fails otherwise.
//
// Within a term, lease says whether the lease is still current, by the
// process's monotonic clock: a leader that was paused past its lease finds
// out before its next publish, not when client-go's renewal loop runs
// again.
func leaderElected(kube kubernetes.Interface, namespace, name string, log *slog.Logger, fn term) func(context.Context) error {
	return func(ctx context.Context) error {
		host, _ := os.Hostname()
		identity := host + "_" + uuid.NewString()[:8]
		for ctx.Err() == nil {
			if err := leadOnce(ctx, kube, namespace, name, identity, log, fn); err != nil {
				return err
			}
			if ctx.Err() == nil {
				log.Warn("lost the watcher lease; standing by", "lease", namespace+"/"+name, "identity", identity)
			}
		}
		return nil
	}
}

// leadOnce stands by until this process holds the lease, runs fn while it
// does, and returns once the lease is lost (nil) or fn failed, after fn
// returned.
func leadOnce(ctx context.Context, kube kubernetes.Interface, namespace, name, identity string, log *slog.Logger, fn term) error {
	lock := &renewals{Interface: &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: namespace, Name: name},
		Client:     kube.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: identity},
	}}
	var le *leaderelection.LeaderElector
	// lease is current while this process is the leader it observed last,
	// and its last renewal was sent less than renewDeadline ago: before a
	// standby may take the lease (leaseDuration).
	lease := func() error {
		if !le.IsLeader() {
			return errNotLeading
		}
		if since := lock.since(); since >= renewDeadline {
			return fmt.Errorf("%w: not renewed for %s", errNotLeading, since.Round(time.Millisecond))
		}
		return nil
	}
	var fnErr error
	done := make(chan struct{})
	var err error
	le, err = leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:          lock,
		LeaseDuration: leaseDuration,
		RenewDeadline: renewDeadline,
		RetryPeriod:   retryPeriod,
		// Not client-go's ReleaseOnCancel: it releases after any lost
		// renewal, judging by the record it observed last — after a
		// pause, its own, stale — and so clears the successor's lease.
		// release does it on shutdown only, while the lease is current.
		Name: name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(term context.Context) {
				defer close(done)
				log.Info("leading: this watcher is active", "lease", namespace+"/"+name, "identity", identity)
				if err := fn(term, lease); err != nil && term.Err() == nil {
					fnErr = err
				}
			},
			OnStoppedLeading: func() {},
			OnNewLeader: func(leader string) {
				if leader != identity {
					log.Info("standing by", "leader", leader)
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	le.Run(ctx) // returns once ctx ends or the lease is lost
	if lock.led() {
		<-done // the term's context ended: fn returns
		if ctx.Err() != nil && lease() == nil {
			lock.release(identity, log)
		}
	}
	return fnErr
}

// release gives up the lease on shutdown, so that a standby takes over at
// once rather than when the lease expires: if the lease still names this
// process, it is rewritten to name no one, expiring at once, conditioned
// on the resourceVersion read (a successor's lease is never cleared).
func (r *renewals) release(identity string, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), renewDeadline)
	defer cancel()
	rec, _, err := r.Get(ctx)
	if err != nil || rec.HolderIdentity != identity {
		return
	}
	now := metav1.Now()
	released := resourcelock.LeaderElectionRecord{LeaseDurationSeconds: 1, AcquireTime: now, RenewTime: now, LeaderTransitions: rec.LeaderTransitions}
	if err := r.Interface.Update(ctx, released); err != nil {
		log.Warn("release the watcher lease", "err", err)
		return
	}
	log.Info("released the watcher lease")
}

// renewals is the lease's lock, remembering when the last of its writes
// that succeeded (an acquisition or a renewal) was sent.
type renewals struct {
	resourcelock.Interface
	mu   sync.Mutex
	sent time.Time
}

func (r *renewals) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	return r.mark(time.Now(), r.Interface.Create(ctx, ler))
}

func (r *renewals) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	return r.mark(time.Now(), r.Interface.Update(ctx, ler))
}

func (r *renewals) mark(sent time.Time, err error) error {
	if err == nil {
		r.mu.Lock()
		r.sent = sent
		r.mu.Unlock()
	}
	return err
}

// since is the time since the last write that succeeded was sent.
func (r *renewals) since() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return time.Since(r.sent)
}

// led tells whether a write ever succeeded: this process led.
func (r *renewals) led() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return !r.sent.IsZero()
}

// activeWatcher is the watcher of the current term, if any.
type activeWatcher struct {
	mu  sync.Mutex
	w   *watcher.Watcher
	reg *registry.Registry // the registry it reads
}

func (a *activeWatcher) set(w *watcher.Watcher, reg *registry.Registry) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.w, a.reg = w, reg
}

// registry is the registry the active watcher reads, or nil.
func (a *activeWatcher) registry() *registry.Registry {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.reg
}

// Consumers names the consumers the active watcher needs (a standby needs
// none).
func (a *activeWatcher) Consumers() []topology.Consumer {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.w == nil {
		return nil
	}
	return a.w.Consumers()
}
