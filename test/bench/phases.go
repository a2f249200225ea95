package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"golang.org/x/time/rate"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"universalcontroller.dev/uc/examples/fanout"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// resyncPeriod is the resyncPeriodSeconds the resync phase sets.
const resyncPeriod = 10

// phase is one step of the workload: changes the driver makes, and what
// tells that uc has made the cluster match them.
type phase struct {
	name string
	// parents are those the phase changes.
	parents []string
	// change makes the phase's changes.
	change func(ctx context.Context) error
	// reached is the goal of each parent the driver changes; the phase has
	// converged when every parent reached it.
	reached func(parent string) bool
	// converged, for a phase that changes no parent, tells instead when it
	// has converged.
	converged func(ctx context.Context, w *window) (bool, error)
	// undo, when set, undoes what change did that must not outlast the
	// phase, once it converged.
	undo func(ctx context.Context) error
}

// session is uc running a Fanout controller over the parents of one
// namespace, and what serves its hook.
type session struct {
	e          *env
	uc         *ucProcess
	controller string
	hooks      hookServer // nil until serve
	obs        *observer
	ns         string
	labels     map[string]string // of the parents it creates
	parents    []string
}

// hookServer is what serves a session's hook: workers in this process, or
// hook processes.
type hookServer interface {
	stop()
	// exited returns an error once a process serving the hook has exited.
	exited() error
}

// runPhases runs the phases in order. After a phase that did not converge
// it goes on with the next one as long as uc went idle, so one miss does not
// hide the other measurements; it returns every failure.
func runPhases(ctx context.Context, e *env, res *results) error {
	ctl, err := e.controllerObject(fanout.Controller, nil)
	if err != nil {
		return err
	}
	s, err := startSession(ctx, e, phaseNamespace, ctl, nil)
	if err != nil {
		return err
	}
	defer s.stop()
	if err := s.serve(ctx, serveHook(ctx, s.uc, e.hook, s.controller), 1); err != nil {
		return err
	}
	if res.UCIdle, err = s.uc.idleMemory(ctx); err != nil {
		return err
	}
	floors := map[string]floorResult{}
	for _, f := range res.Floor {
		floors[f.Name] = f
	}
	var errs []error
	for _, p := range s.phases() {
		r, err := s.run(ctx, p)
		r.summarize(floors[p.name])
		res.Phases = append(res.Phases, r)
		if err != nil {
			e.failed = true
			errs = append(errs, fmt.Errorf("phase %s: %w", p.name, err))
			if !r.Idle {
				break
			}
		}
	}
	return errors.Join(errs...)
}

// startSession starts uc (its work directory named after ns) and registers
// the controller ctl, whose parents are those of ns labelled with labels.
// Nothing serves its hook yet.
func startSession(ctx context.Context, e *env, ns string, ctl *unstructured.Unstructured, labels map[string]string) (*session, error) {
	s := &session{e: e, controller: ctl.GetName(), ns: ns, labels: labels, parents: parentNames(e.cfg.parents)}
	var err error
	if s.obs, err = startObserver(ctx, e.api, ns); err != nil {
		return nil, err
	}
	if s.uc, err = e.startUC(ctx, "uc-"+ns); err != nil {
		return nil, err
	}
	if err := e.registerControllers(ctx, ctl); err != nil {
		s.uc.stop()
		return nil, err
	}
	return s, nil
}

// serve makes h serve the session's hook instead of what served it, and
// waits until at least pullers of h's workers ask for requests.
func (s *session) serve(ctx context.Context, h hookServer, pullers int) error {
	if s.hooks != nil {
		s.hooks.stop()
	}
	s.hooks = h
	return s.uc.hookReady(ctx, s.controller, pullers)
}

func (s *session) stop() {
	if s.hooks != nil {
		s.hooks.stop()
	}
	s.uc.stop()
	if err := s.e.unregisterControllers(context.Background(), s.controller); err != nil {
		logf("%v", err)
	}
}

// skippable are the phases -skip may leave out: create makes the state
// every later phase starts from, and update the state of heal, paced and
// resync (heal expects the update's payload), which must go with it.
var skippable = []string{"update", "heal", "paced", "resync", "delete"}

// afterUpdate are the phases that start from update's state.
var afterUpdate = []string{"heal", "paced", "resync"}

// phases are create, update, heal, paced, resync and delete, in that
// order, less those -skip leaves out.
func (s *session) phases() []phase {
	all := []phase{s.create(), s.update(), s.heal(), s.paced(), s.resync(), s.delete()}
	return slices.DeleteFunc(all, func(p phase) bool { return slices.Contains(s.e.cfg.skip, p.name) })
}

// fanouts is the driver's client of the parents.
func (s *session) fanouts() dynamic.ResourceInterface {
	return s.e.driver.dyn.Resource(fanout.GVR).Namespace(s.ns)
}

// create creates every parent; a parent has converged when its status
// shows its M children at its generation and they carry its payload.
func (s *session) create() phase {
	m := s.e.cfg.children
	return phase{
		name:    "create",
		parents: s.parents,
		change: s.eachParent(s.parents, func(ctx context.Context, p string) error {
			_, err := s.fanouts().Create(ctx, newFanout(s.ns, p, m, createPayload, s.labels), metav1.CreateOptions{})
			return err
		}),
		reached: func(p string) bool { return s.obs.synced(p, m, createPayload) },
	}
}

// update changes every parent's payload at once.
func (s *session) update() phase {
	return s.setPayload("update", updatePayload, s.parents, nil)
}

// paced changes the payload of -paced-parents parents like update, but at
// a steady rate (-paced-rate parents per second) instead of all at once:
// its latencies are uc's change-to-applied time under a load it keeps up
// with, not the time a change waits behind a burst.
func (s *session) paced() phase {
	limit := rate.NewLimiter(rate.Limit(s.e.cfg.pacedRate), 1)
	return s.setPayload("paced", pacedPayload, s.parents[:min(len(s.parents), s.e.cfg.pacedParents)], limit.Wait)
}

// setPayload is a phase that sets the payload of parents, each after wait
// when set; a parent has converged when its M children carry the payload.
func (s *session) setPayload(name, payload string, parents []string, wait func(context.Context) error) phase {
	return phase{
		name:    name,
		parents: parents,
		change: s.eachParent(parents, func(ctx context.Context, p string) error {
			if wait != nil {
				if err := wait(ctx); err != nil {
					return err
				}
			}
			_, err := s.fanouts().Patch(ctx, p, types.MergePatchType, mergePatch(payload, "spec", "payload"), metav1.PatchOptions{})
			return err
		}),
		reached: func(p string) bool { return s.obs.carrying(p, payload) == s.e.cfg.children },
	}
}

// resync makes uc sync every unchanged parent periodically, until every
// parent was synced by the period, then stops it.
func (s *session) resync() phase {
	return phase{
		name:      "resync",
		parents:   s.parents,
		change:    func(ctx context.Context) error { return s.setResyncPeriod(ctx, resyncPeriod) },
		converged: s.resynced,
		undo:      func(ctx context.Context) error { return s.setResyncPeriod(ctx, nil) },
	}
}

// delete deletes every parent; a parent has converged when the garbage
// collector deleted its children.
func (s *session) delete() phase {
	return phase{
		name:    "delete",
		parents: s.parents,
		change: s.eachParent(s.parents, func(ctx context.Context, p string) error {
			return s.fanouts().Delete(ctx, p, metav1.DeleteOptions{})
		}),
		reached: s.obs.gone,
	}
}

// heal deletes the first ConfigMap of every parent; a parent is healed when
// a new one (another UID) carries the payload again.
func (s *session) heal() phase {
	deleted := map[string]types.UID{}
	child := func(p string) string { return fanout.ChildName(p, 0) }
	write := s.eachParent(s.parents, func(ctx context.Context, p string) error {
		uid := deleted[p]
		return s.e.driver.kube.CoreV1().ConfigMaps(s.ns).
			Delete(ctx, child(p), metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	})
	return phase{
		name:    "heal",
		parents: s.parents,
		change: func(ctx context.Context) error {
			for _, p := range s.parents {
				cm := s.obs.child(child(p))
				if cm == nil {
					return fmt.Errorf("ConfigMap %s is missing before the heal", child(p))
				}
				deleted[p] = cm.UID
			}
			return write(ctx)
		},
		reached: func(p string) bool {
			cm := s.obs.child(child(p))
			return cm != nil && cm.UID != deleted[p] && cm.Data[fanout.PayloadKey] == updatePayload
		},
	}
}

// setResyncPeriod sets resyncPeriodSeconds on the controller (nil: unsets
// it). Changing the controller re-registers it, which syncs every parent at
// once; a period then syncs every parent again after it.
func (s *session) setResyncPeriod(ctx context.Context, seconds any) error {
	_, err := s.e.api.dyn.Resource(v1alpha1.Resource).Patch(ctx, fanout.Controller, types.MergePatchType,
		mergePatch(seconds, "spec", "resyncPeriodSeconds"), metav1.PatchOptions{})
	return err
}

// resynced holds once every parent was synced by the periodic resync: a
// hook call a period after the phase began. (Not that the bus is empty: when
// a round takes longer than the period, it never is until the period is
// unset.)
func (s *session) resynced(_ context.Context, w *window) (bool, error) {
	periodic := w.start.Add(resyncPeriod * time.Second)
	return s.e.hook.calledSince(periodic, s.ns, s.parents) == len(s.parents), nil
}

// eachParent is a change that calls write for each of parents, at the
// bench's concurrency, telling the observer when each parent's change
// begins.
func (s *session) eachParent(parents []string, write func(ctx context.Context, parent string) error) func(context.Context) error {
	return func(ctx context.Context) error {
		return parallel(ctx, len(parents), s.e.cfg.concurrency, func(ctx context.Context, i int) error {
			s.obs.changing(parents[i])
			return write(ctx, parents[i])
		})
	}
}

// run runs one phase: it opens a measurement window, makes the changes,
// waits until they converged (the phase's wall time), undoes what must not
// outlast the phase, then waits until uc is idle (the end of the window, so
// trailing no-op syncs count too).
func (s *session) run(ctx context.Context, p phase) (phaseResult, error) {
	r := phaseResult{Name: p.name, Parents: len(p.parents)}
	w, err := s.e.open(ctx, p.name, s.uc)
	if err != nil {
		return r, err
	}
	logf("phase %s", p.name)
	converged := p.converged
	if p.reached != nil {
		s.obs.track(p.reached)
		converged = func(context.Context, *window) (bool, error) { return s.obs.reachedAll(len(p.parents)), nil }
	}
	err = p.change(ctx)
	if err == nil {
		err = waitFor(ctx, s.e.cfg.phaseTimeout, "convergence", func(ctx context.Context) (bool, error) {
			if err := errors.Join(s.uc.exited(), s.hooks.exited()); err != nil {
				return false, fatalError{err}
			}
			return converged(ctx, w)
		}, func() string { return s.progress(p, w) })
	}
	end := time.Now()
	if p.reached != nil {
		latencies, last := s.obs.outcome()
		r.setLatencies(latencies)
		if err == nil {
			end = last
		}
	}
	r.Seconds = end.Sub(w.start).Seconds()
	r.Converged = err == nil
	// Converged or not, undo and wait until uc is idle, so that the next
	// phase starts from a quiet uc.
	var undoErr error
	if p.undo != nil {
		undoErr = p.undo(ctx)
	}
	idleErr := s.uc.settle(ctx, s.e.hook, s.e.cfg.phaseTimeout)
	r.Idle = idleErr == nil
	r.SettledSeconds = time.Since(w.start).Seconds()
	m, closeErr := w.close(ctx)
	r.measurement = m
	heap, heaps, heapErr := s.uc.liveHeaps(ctx)
	r.LiveHeapMiB = mib(heap)
	if dir := s.e.cfg.ucHeapProfiles; dir != "" && heapErr == nil {
		heapErr = s.uc.saveHeaps(ctx, dir, p.name)
	}
	if len(heaps) > 1 {
		r.LiveHeapMiBByRole = map[string]float64{}
		for role, n := range heaps {
			r.LiveHeapMiBByRole[role] = mib(n)
		}
	}
	var spreadErr error
	r.Replicas, spreadErr = s.uc.spread(ctx, s.obs.uids())
	if err := errors.Join(err, undoErr, idleErr, closeErr, heapErr, spreadErr); err != nil {
		return r, err
	}
	logf("phase %s: converged in %.2fs, idle after %.2fs, %d hook calls%s", p.name, r.Seconds, r.SettledSeconds, m.HookCalls, shares(r.Replicas))
	return r, nil
}

func (s *session) progress(p phase, w *window) string {
	if p.reached != nil {
		return s.obs.progress(p.parents)
	}
	late := s.e.hook.notCalledSince(w.start.Add(resyncPeriod*time.Second), s.ns, p.parents)
	return fmt.Sprintf("%d hook calls; %d parents not resynced, such as %s", w.callsSince(), len(late), examples(late))
}

// examples names the first few of a list.
func examples(names []string) string {
	const few = 3
	if len(names) > few {
		return strings.Join(names[:few], ", ") + ", …"
	}
	return strings.Join(names, ", ")
}
