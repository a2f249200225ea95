package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"universalcontroller.dev/uc/examples/fanout"
)

// The sharing parents are spread over shards by label; with k controllers,
// controller i takes the shards j with j mod k = i. The objects stay the
// same whatever k is, so what changes is only the number of controllers.
const (
	shards     = 10
	shardLabel = "bench.universalcontroller.dev/shard"
)

// sharingResult is uc with some controllers watching the same child kind.
type sharingResult struct {
	Controllers int `json:"controllers"`
	// Seconds is how long a fresh uc took to sync every parent once.
	Seconds   float64 `json:"seconds"`
	HookCalls int64   `json:"hookCalls"`
	// Writes is uc's writes to the parents and children.
	Writes int64 `json:"writes"`
	// RSSMiB is uc's once idle; PeakRSSMiB the most since it started.
	RSSMiB     float64 `json:"rssMiB"`
	PeakRSSMiB float64 `json:"peakRSSMiB"`
	// HeapMiB is uc's live Go heap once idle, right after a collection.
	HeapMiB float64 `json:"heapMiB"`
	// Watches is uc's watches open at the apiserver, by resource: the
	// count while uc runs less the count just before it started.
	Watches map[string]int64 `json:"watches"`
}

// sharing measures uc with k controllers over the same parents.
type sharing struct {
	e       *env
	obs     *observer
	parents []string
	idle    apiMetrics // with no uc running
}

// runSharing measures uc's memory and watches with each number of
// controllers in cfg.sharing, each time in a fresh uc over the same
// converged parents and children, which a first, unmeasured uc creates.
func runSharing(ctx context.Context, e *env) ([]sharingResult, error) {
	if len(e.cfg.sharing) == 0 {
		return nil, nil
	}
	s := &sharing{e: e, parents: parentNames(e.cfg.sharingParents)}
	var err error
	if s.obs, err = startObserver(ctx, e.api, sharingNamespace); err != nil {
		return nil, err
	}
	err = parallel(ctx, len(s.parents), e.cfg.concurrency, func(ctx context.Context, i int) error {
		f := newFanout(sharingNamespace, s.parents[i], e.cfg.children, createPayload, map[string]string{shardLabel: strconv.Itoa(i % shards)})
		_, err := e.driver.dyn.Resource(fanout.GVR).Namespace(sharingNamespace).Create(ctx, f, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return nil, err
	}
	if s.idle, err = scrapeMetrics(ctx, e.api.kube.CoreV1().RESTClient()); err != nil {
		return nil, err
	}
	logf("sharing: %d parents, children created by a first uc", len(s.parents))
	if _, err := s.round(ctx, 1, "warm-up"); err != nil {
		e.failed = true
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	var out []sharingResult
	for _, k := range e.cfg.sharing {
		r, err := s.round(ctx, k, "sharing")
		if err != nil {
			e.failed = true
			return out, fmt.Errorf("%d controllers: %w", k, err)
		}
		logf("sharing: %d controllers: RSS %.1f MiB, live heap %.2f MiB, uc's watches %v", k, r.RSSMiB, r.HeapMiB, r.Watches)
		out = append(out, r)
	}
	return out, nil
}

// round starts uc with k controllers sharing the parents, waits until it
// synced each parent, every parent converged and uc went idle, and
// measures it.
func (s *sharing) round(ctx context.Context, k int, name string) (sharingResult, error) {
	r := sharingResult{Controllers: k}
	if err := s.watchesBackToIdle(ctx); err != nil {
		return r, err
	}
	w, err := s.e.open(ctx, fmt.Sprintf("sharing-%d", k), nil)
	if err != nil {
		return r, err
	}
	uc, err := s.e.startUC(ctx, fmt.Sprintf("uc-%s-%d", name, k))
	if err != nil {
		return r, err
	}
	defer uc.stop()
	ucs, names, err := s.e.sharingControllers(name, k)
	if err != nil {
		return r, err
	}
	if err := s.e.registerControllers(ctx, ucs...); err != nil {
		return r, err
	}
	defer func() {
		if err := s.e.unregisterControllers(context.WithoutCancel(ctx), names...); err != nil {
			logf("%v", err)
		}
	}()
	hooks := serveHook(ctx, uc, s.e.hook, names...)
	defer hooks.stop()
	m := s.e.cfg.children
	err = waitFor(ctx, s.e.cfg.phaseTimeout, "every parent synced", func(context.Context) (bool, error) {
		if err := uc.exited(); err != nil {
			return false, fatalError{err}
		}
		if s.e.hook.calledSince(w.start, sharingNamespace, s.parents) < len(s.parents) {
			return false, nil
		}
		for _, p := range s.parents {
			if !s.obs.synced(p, m, createPayload) {
				return false, nil
			}
		}
		return true, nil
	}, nil)
	if err != nil {
		return r, err
	}
	r.Seconds = time.Since(w.start).Seconds()
	if err := uc.settle(ctx, s.e.hook, s.e.cfg.phaseTimeout); err != nil {
		return r, err
	}
	return r, s.measure(ctx, &r, w, uc)
}

// measure fills r with what the window saw and what uc holds now.
func (s *sharing) measure(ctx context.Context, r *sharingResult, w *window, uc *ucProcess) error {
	m, err := w.close(ctx)
	if err != nil {
		return err
	}
	r.HookCalls, r.Writes = m.HookCalls, m.workloadWrites()
	mem, _, err := uc.memory()
	if err != nil {
		return err
	}
	r.RSSMiB, r.PeakRSSMiB = mib(mem.RSS), mib(mem.Peak)
	heap, err := uc.liveHeap(ctx)
	if err != nil {
		return err
	}
	r.HeapMiB = mib(heap)
	now, err := scrapeMetrics(ctx, s.e.api.kube.CoreV1().RESTClient())
	if err != nil {
		return err
	}
	r.Watches = map[string]int64{}
	for res, n := range now.watches {
		if d := n - w.metrics.watches[res]; d != 0 {
			r.Watches[res] = d
		}
	}
	return nil
}

// watchesBackToIdle waits until the apiserver has no more watches open than
// with no uc running, so the watches of a uc just stopped are not counted
// as the next one's.
func (s *sharing) watchesBackToIdle(ctx context.Context) error {
	return waitFor(ctx, time.Minute, "the previous uc's watches to close", func(ctx context.Context) (bool, error) {
		now, err := scrapeMetrics(ctx, s.e.api.kube.CoreV1().RESTClient())
		if err != nil {
			return false, err
		}
		return sum(now.watches) <= sum(s.idle.watches), nil
	}, nil)
}

func sum(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

// sharingControllers are k Fanout controllers that share out the shards.
func (e *env) sharingControllers(prefix string, k int) ([]*unstructured.Unstructured, []string, error) {
	var ucs []*unstructured.Unstructured
	var names []string
	for i := range k {
		var mine []string
		for j := i; j < shards; j += k {
			mine = append(mine, strconv.Itoa(j))
		}
		name := fmt.Sprintf("fanout-%s-%d-of-%d", prefix, i+1, k)
		uc, err := e.controllerObject(name, &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
			Key: shardLabel, Operator: metav1.LabelSelectorOpIn, Values: mine,
		}}})
		if err != nil {
			return nil, nil, err
		}
		ucs, names = append(ucs, uc), append(names, name)
	}
	return ucs, names, nil
}
