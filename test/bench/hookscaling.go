package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"universalcontroller.dev/uc/schemas/v1alpha1"
	"universalcontroller.dev/uc/test/testbed"
)

// The hook scaling runs its own controller, over the parents of its own
// namespace carrying its label, so that no other measurement's controller
// takes them and it takes no other's.
const (
	hooksController = "fanout-hook-scaling"
	hooksLabel      = "bench.universalcontroller.dev/hook-scaling"
	// callsSubject is where the hook processes announce each call.
	callsSubject = "uc-bench.hook.calls"
	// webhookConcurrency is the calls the dispatcher makes to the webhook
	// at once: its default, set on the controller so that it is known.
	webhookConcurrency = 16
	// inProcessConcurrency is the calls the bench's own workers serve at
	// once: the worker SDK's default.
	inProcessConcurrency = 16
	// metacontrollerWorkers is the --workers of the tuned Metacontroller
	// the issue measured: each of its workers calls one hook at a time and
	// applies the reply before it takes the next parent.
	metacontrollerWorkers = 20
)

// Who served a round's hook.
const (
	inProcess = "in-process"
	busNative = "bus-native"
	webhook   = "webhook"
)

// hookRound is one round of the hook scaling: every parent changed at once
// while some hook serves the controller.
type hookRound struct {
	// Hook is what served it: in-process (the bench's workers, no delay),
	// bus-native (delayhook processes on the bus) or webhook (one delayhook
	// process called by uc's dispatcher).
	Hook string `json:"hook"`
	// Workers is the processes serving the hook (0 for in-process), and
	// Concurrency the calls each serves at once (for the webhook: the
	// dispatcher's).
	Workers      int     `json:"workers"`
	Concurrency  int     `json:"concurrency"`
	DelaySeconds float64 `json:"delaySeconds"`
	phaseResult
	// ParentsPerSecond is the parents over the wall time until the last
	// converged.
	ParentsPerSecond float64 `json:"parentsPerSecond"`
	// CallsPerSecond, APIServerRequestsPerSecond (every request but
	// watches) and APIServerCores are over the window until uc was idle.
	CallsPerSecond             float64 `json:"callsPerSecond"`
	APIServerRequestsPerSecond float64 `json:"apiserverRequestsPerSecond"`
	APIServerCores             float64 `json:"apiserverCores"`
	// CapacityPerSecond is the calls the hook can answer per second
	// (workers × concurrency / delay), and HookBusy the part of it the
	// round used: below 1, something else than the hook was the limit.
	// Both 0 for a hook with no delay.
	CapacityPerSecond float64 `json:"capacityPerSecond,omitempty"`
	HookBusy          float64 `json:"hookBusy,omitempty"`
}

// summarize sets the rates of a round.
func (r *hookRound) summarize() {
	window := r.SettledSeconds
	if r.Seconds > 0 {
		r.ParentsPerSecond = float64(r.Parents) / r.Seconds
	}
	if window <= 0 {
		return
	}
	r.CallsPerSecond = float64(r.HookCalls) / window
	r.APIServerRequestsPerSecond, r.APIServerCores = r.apiserverRates(window)
	if r.DelaySeconds > 0 {
		r.CapacityPerSecond = float64(r.Workers*r.Concurrency) / r.DelaySeconds
		r.HookBusy = r.CallsPerSecond / r.CapacityPerSecond
	}
}

// hookScaling is what the hook scaling measured.
type hookScaling struct {
	Rounds []hookRound `json:"rounds"`
	// Metacontroller is its --workers model for the same hook, computed:
	// each worker makes at most 1/delay calls per second.
	Metacontroller metacontrollerModel `json:"metacontrollerModel"`
}

// metacontrollerModel is the most Metacontroller's worker pool gives with a
// hook of a given delay: every worker always calling the hook, the applies
// taking no time.
type metacontrollerModel struct {
	Workers        int     `json:"workers"`
	CallsPerSecond float64 `json:"callsPerSecond"`
	// CallsPerParent is uc's, measured in the delayed rounds (the same
	// hook, the same changes), and ParentsPerSecond the calls over it.
	CallsPerParent   float64 `json:"callsPerParent"`
	ParentsPerSecond float64 `json:"parentsPerSecond"`
}

// runHookScaling creates the parents with the bench's in-process hook and
// updates them twice (the first update of a child uc created also moves
// its fields to uc's apply, once; the second is this machine's most with a
// hook that costs nothing), then changes every parent's payload once per
// hook: delayhook processes on the bus, -hook-workers of them, then one
// delayhook webhook through uc's dispatcher. After a round that did not
// converge it goes on as long as uc went idle.
func runHookScaling(ctx context.Context, e *env) (*hookScaling, error) {
	labels := map[string]string{hooksLabel: "true"}
	ctl, err := e.controllerObject(hooksController, &metav1.LabelSelector{MatchLabels: labels})
	if err != nil {
		return nil, err
	}
	s, err := startSession(ctx, e, hooksNamespace, ctl, labels)
	if err != nil {
		return nil, err
	}
	defer s.stop()
	sub, err := s.uc.nc.Subscribe(callsSubject, func(m *nats.Msg) { e.hook.record(string(m.Data)) })
	if err != nil {
		return nil, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := s.uc.nc.Flush(); err != nil {
		return nil, err
	}
	hs := &hookScaling{}
	var errs []error
	// round runs one round; it says whether to go on.
	round := func(r hookRound, p phase) bool {
		res, err := s.run(ctx, p)
		r.phaseResult = res
		r.summarize()
		hs.Rounds = append(hs.Rounds, r)
		if err != nil {
			e.failed = true
			errs = append(errs, fmt.Errorf("round %s: %w", p.name, err))
		}
		return err == nil || r.Idle
	}
	if err := s.serve(ctx, serveHook(ctx, s.uc, e.hook, s.controller), 1); err != nil {
		return nil, err
	}
	fast := hookRound{Hook: inProcess, Concurrency: inProcessConcurrency}
	if !round(fast, s.create()) ||
		!round(fast, s.setPayload("first update", updatePayload, s.parents, nil)) ||
		!round(fast, s.setPayload("update", pacedPayload, s.parents, nil)) {
		return hs, errors.Join(errs...)
	}
	delay := e.cfg.hookDelay
	for _, k := range e.cfg.hookWorkers {
		procs, err := s.startHooks(k)
		if err == nil {
			err = s.serve(ctx, procs, k)
		}
		if err != nil {
			return hs, errors.Join(append(errs, err)...)
		}
		r := hookRound{Hook: busNative, Workers: k, Concurrency: e.cfg.hookConcurrency, DelaySeconds: delay.Seconds()}
		if !round(r, s.setPayload(fmt.Sprintf("bus-native ×%d", k), fmt.Sprintf("payload of %d hook workers", k), s.parents, nil)) {
			return hs, errors.Join(errs...)
		}
	}
	if err := s.serveWebhook(ctx); err != nil {
		return hs, errors.Join(append(errs, err)...)
	}
	r := hookRound{Hook: webhook, Workers: 1, Concurrency: webhookConcurrency, DelaySeconds: delay.Seconds()}
	round(r, s.setPayload("webhook", "payload of the webhook", s.parents, nil))
	hs.Metacontroller = metacontrollerFor(delay, hs.Rounds)
	return hs, errors.Join(errs...)
}

// metacontrollerFor computes Metacontroller's --workers model for a hook of
// that delay, with uc's calls per parent in the delayed rounds.
func metacontrollerFor(delay time.Duration, rounds []hookRound) metacontrollerModel {
	m := metacontrollerModel{Workers: metacontrollerWorkers, CallsPerSecond: metacontrollerWorkers / delay.Seconds()}
	var calls, parents int64
	for _, r := range rounds {
		if r.DelaySeconds > 0 {
			calls += r.HookCalls
			parents += int64(r.Parents)
		}
	}
	if calls > 0 {
		m.CallsPerParent = float64(calls) / float64(parents)
		m.ParentsPerSecond = m.CallsPerSecond / m.CallsPerParent
	}
	return m
}

// hookProcesses are delayhook processes serving a session's hook.
type hookProcesses []*process

func (h hookProcesses) stop() {
	for _, p := range h {
		p.stop()
	}
}

func (h hookProcesses) exited() error {
	for _, p := range h {
		if err := p.exited(); err != nil {
			return err
		}
	}
	return nil
}

// startHooks starts k delayhook processes serving the session's hook on the
// bus.
func (s *session) startHooks(k int) (hookProcesses, error) {
	var procs hookProcesses
	for i := range k {
		p, err := s.startHook(fmt.Sprintf("delayhook-%d-of-%d", i+1, k),
			"--concurrency", strconv.Itoa(s.e.cfg.hookConcurrency))
		if err != nil {
			procs.stop()
			return nil, err
		}
		procs = append(procs, p)
	}
	return procs, nil
}

// startHook starts a delayhook process named name with args, announcing
// its calls on callsSubject.
func (s *session) startHook(name string, args ...string) (*process, error) {
	args = append([]string{"--nats-url", s.uc.url, "--controller", s.controller,
		"--delay", s.e.cfg.hookDelay.String(), "--calls-subject", callsSubject}, args...)
	return startProcess(name, filepath.Join(s.e.dir, name+".log"), s.e.hookBin, args...)
}

// serveWebhook makes one delayhook webhook process the session's hook,
// called by uc's dispatcher webhookConcurrency calls at once. Changing the
// controller syncs every parent again: serveWebhook waits until the webhook
// served every parent and uc is idle after it.
func (s *session) serveWebhook(ctx context.Context) error {
	ports, err := testbed.FreePorts(1)
	if err != nil {
		return err
	}
	addr := "127.0.0.1:" + strconv.Itoa(ports[0])
	p, err := s.startHook("delayhook-webhook", "--listen", addr)
	if err != nil {
		return err
	}
	s.hooks.stop()
	s.hooks = hookProcesses{p}
	err = waitFor(ctx, time.Minute, "the webhook to listen", func(ctx context.Context) (bool, error) {
		if err := p.exited(); err != nil {
			return false, fatalError{err}
		}
		conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err != nil {
			return false, err
		}
		return true, conn.Close()
	}, nil)
	if err != nil {
		return err
	}
	concurrency := int32(webhookConcurrency)
	sync := v1alpha1.Hook{Webhook: webhookAt("http://" + addr + "/"), Delivery: &v1alpha1.Delivery{Concurrency: &concurrency}}
	changed := time.Now()
	_, err = s.e.api.dyn.Resource(v1alpha1.Resource).Patch(ctx, s.controller, types.MergePatchType,
		mergePatch(sync, "spec", "hooks", "sync"), metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("make the hook a webhook: %w", err)
	}
	err = waitFor(ctx, s.e.cfg.phaseTimeout, "the webhook to serve every parent", func(context.Context) (bool, error) {
		if err := errors.Join(s.uc.exited(), p.exited()); err != nil {
			return false, fatalError{err}
		}
		return s.e.hook.calledSince(changed, s.ns, s.parents) == len(s.parents), nil
	}, nil)
	if err != nil {
		return err
	}
	return s.uc.settle(ctx, s.e.hook, s.e.cfg.phaseTimeout)
}

func webhookAt(url string) *v1alpha1.Webhook { return &v1alpha1.Webhook{URL: &url} }
