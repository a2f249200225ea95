package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"universalcontroller.dev/uc/examples/fanout"
)

// floorResult is one phase's writes made directly with client-go.
type floorResult struct {
	Name    string  `json:"name"`
	Seconds float64 `json:"seconds"`
	measurement
}

// floor makes, parent by parent, the writes of each phase as directly as
// client-go allows: the driver's change, and what a controller with nothing
// to read or decide would write.
type floor struct {
	e       *env
	ns      string
	parents []*unstructured.Unstructured // each as last written
}

// floorSteps are the phases the floor mirrors (resync has nothing to
// write), each a write of one parent.
var floorSteps = []struct {
	name  string
	write func(f *floor, ctx context.Context, i int) error
}{
	{"create", (*floor).create},
	{"update", (*floor).update},
	{"heal", (*floor).heal},
	{"delete", (*floor).delete},
}

// create writes the parent, its M children and its status.
func (f *floor) create(ctx context.Context, i int) error {
	p, err := f.e.writeFanout(ctx, f.ns, parentName(i), createPayload, nil)
	f.parents[i] = p
	return err
}

// update writes the parent's payload, its M children and its status.
func (f *floor) update(ctx context.Context, i int) error {
	p, err := f.e.driver.dyn.Resource(fanout.GVR).Namespace(f.ns).Patch(ctx, parentName(i), types.MergePatchType,
		mergePatch(updatePayload, "spec", "payload"), metav1.PatchOptions{})
	if err != nil {
		return err
	}
	f.parents[i] = p
	for c := range f.e.cfg.children {
		if _, err := f.e.driver.kube.CoreV1().ConfigMaps(f.ns).Update(ctx, childOf(p, c, updatePayload), metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	return f.e.writeStatus(ctx, p)
}

// heal deletes the parent's first child and creates it again.
func (f *floor) heal(ctx context.Context, i int) error {
	cm := childOf(f.parents[i], 0, updatePayload)
	cms := f.e.driver.kube.CoreV1().ConfigMaps(f.ns)
	if err := cms.Delete(ctx, cm.Name, metav1.DeleteOptions{}); err != nil {
		return err
	}
	_, err := cms.Create(ctx, cm, metav1.CreateOptions{})
	return err
}

// delete deletes the children, then the parent.
func (f *floor) delete(ctx context.Context, i int) error {
	for c := range f.e.cfg.children {
		if err := f.e.driver.kube.CoreV1().ConfigMaps(f.ns).Delete(ctx, fanout.ChildName(parentName(i), c), metav1.DeleteOptions{}); err != nil {
			return err
		}
	}
	return f.e.driver.dyn.Resource(fanout.GVR).Namespace(f.ns).Delete(ctx, parentName(i), metav1.DeleteOptions{})
}

// runFloor makes every phase's writes directly, N parents at the bench's
// concurrency, before uc runs.
func runFloor(ctx context.Context, e *env) ([]floorResult, error) {
	f := &floor{e: e, ns: floorNamespace, parents: make([]*unstructured.Unstructured, e.cfg.parents)}
	var out []floorResult
	for _, step := range floorSteps {
		w, err := e.open(ctx, "floor-"+step.name, nil)
		if err != nil {
			return out, err
		}
		err = parallel(ctx, e.cfg.parents, e.cfg.concurrency, func(ctx context.Context, i int) error {
			return step.write(f, ctx, i)
		})
		r := floorResult{Name: step.name, Seconds: time.Since(w.start).Seconds()}
		if err != nil {
			return out, fmt.Errorf("%s: %w", step.name, err)
		}
		if r.measurement, err = w.close(ctx); err != nil {
			return out, err
		}
		logf("floor %s: %.2fs", step.name, r.Seconds)
		out = append(out, r)
	}
	return out, nil
}

// floorFrom is the floor of an earlier run's results (-floor-from), of
// the same parents and children.
func floorFrom(cfg config) ([]floorResult, error) {
	data, err := os.ReadFile(cfg.floorFrom)
	if err != nil {
		return nil, err
	}
	var earlier results
	if err := json.Unmarshal(data, &earlier); err != nil {
		return nil, fmt.Errorf("%s: %w", cfg.floorFrom, err)
	}
	if earlier.Parents != cfg.parents || earlier.Children != cfg.children || len(earlier.Floor) == 0 {
		return nil, fmt.Errorf("%s: a floor of %d parents × %d (%d steps), want %d × %d", cfg.floorFrom,
			earlier.Parents, earlier.Children, len(earlier.Floor), cfg.parents, cfg.children)
	}
	logf("floor of %s, %s", earlier.Date.Format(time.RFC3339), cfg.floorFrom)
	return earlier.Floor, nil
}

// writeFanout creates a parent as uc would leave it once converged: the
// parent, its M children carrying payload, and its status.
func (e *env) writeFanout(ctx context.Context, ns, name, payload string, labels map[string]string) (*unstructured.Unstructured, error) {
	p, err := e.driver.dyn.Resource(fanout.GVR).Namespace(ns).Create(ctx, newFanout(ns, name, e.cfg.children, payload, labels), metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	for c := range e.cfg.children {
		if _, err := e.driver.kube.CoreV1().ConfigMaps(ns).Create(ctx, childOf(p, c, payload), metav1.CreateOptions{}); err != nil {
			return p, err
		}
	}
	return p, e.writeStatus(ctx, p)
}

// writeStatus sets a parent's status as uc would after applying its
// children: all M observed, at its generation.
func (e *env) writeStatus(ctx context.Context, p *unstructured.Unstructured) error {
	status := map[string]any{"children": e.cfg.children, "observedGeneration": p.GetGeneration()}
	_, err := e.driver.dyn.Resource(fanout.GVR).Namespace(p.GetNamespace()).Patch(ctx, p.GetName(), types.MergePatchType,
		mergePatch(status, "status"), metav1.PatchOptions{}, "status")
	return err
}

// childOf is the i-th ConfigMap of a Fanout as the hook asks for it and
// uc's applier controls it.
func childOf(p *unstructured.Unstructured, i int, payload string) *corev1.ConfigMap {
	yes := true
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name:      fanout.ChildName(p.GetName(), i),
			Namespace: p.GetNamespace(),
			Labels:    map[string]string{fanout.ParentLabel: p.GetName()},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: p.GetAPIVersion(), Kind: p.GetKind(), Name: p.GetName(), UID: p.GetUID(),
				Controller: &yes, BlockOwnerDeletion: &yes,
			}},
		},
		Data: map[string]string{fanout.PayloadKey: payload},
	}
}
