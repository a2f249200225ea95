package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/google/uuid"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// errLostLease stops a watcher that lost its lease: a standby takes over.
var errLostLease = errors.New("lost the watcher lease")

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

// leaderElected runs fn only while this process holds the Lease
// namespace/name, so that one watcher is active however many run. It
// returns nil when ctx ends, fn's error if fn fails, and errLostLease when
// the lease is lost: the process then exits, and a standby, whose caches are
// already warm, takes over within the lease duration.
func leaderElected(kube kubernetes.Interface, namespace, name string, log *slog.Logger, fn func(context.Context) error) func(context.Context) error {
	return func(parent context.Context) error {
		host, _ := os.Hostname()
		lock := &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: namespace, Name: name},
			Client:     kube.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: host + "_" + uuid.NewString()[:8]},
		}
		ctx, cancel := context.WithCancel(parent)
		defer cancel()
		var fnErr error
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock:            lock,
			LeaseDuration:   leaseDuration,
			RenewDeadline:   renewDeadline,
			RetryPeriod:     retryPeriod,
			ReleaseOnCancel: true,
			Name:            name,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(ctx context.Context) {
					log.Info("leading: this watcher is active", "lease", namespace+"/"+name, "identity", lock.Identity())
					fnErr = fn(ctx)
					cancel()
				},
				OnStoppedLeading: func() {},
				OnNewLeader: func(identity string) {
					if identity != lock.Identity() {
						log.Info("standing by", "leader", identity)
					}
				},
			},
		})
		if err != nil {
			return fmt.Errorf("leader election: %w", err)
		}
		le.Run(ctx) // returns once ctx ends or the lease is lost
		switch {
		case fnErr != nil:
			return fnErr
		case parent.Err() != nil:
			return nil
		}
		return errLostLease
	}
}
