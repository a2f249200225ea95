// Package catset is thesis use case 3, Metacontroller's CatSet: a
// StatefulSet clone written as UniversalController hooks. A CatSet owns
// ordinal Pods <name>-0, <name>-1, … and, per volumeClaimTemplate, one
// PersistentVolumeClaim <template>-<name>-<ordinal> for each.
//
// The hooks only say what should exist; uc does the rest. Pods come up one at
// a time in order and go one at a time from the highest ordinal. A change of
// the pod template rolls out through uc's RollingRecreate strategy (see
// controller.yaml): Pods are listed highest ordinal first, so that is the
// order in which they are replaced. PVCs outlive a scale-down and go with the
// CatSet. Before a CatSet goes, the finalize hook scales it to zero.
package catset

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"universalcontroller.dev/uc/sdk/go/hook"
)

// Controller is the name of the UniversalController in controller.yaml.
const Controller = "catset-controller"

// GVR is the CatSet resource.
var GVR = schema.GroupVersionResource{Group: "catset.examples.universalcontroller.dev", Version: "v1", Resource: "catsets"}

// CatSet is the parent, as far as the hooks read it.
type CatSet struct {
	Spec Spec `json:"spec"`
}

// Spec is a CatSet's spec: a subset of a StatefulSet's.
type Spec struct {
	Replicas             *int32                         `json:"replicas,omitempty"`
	ServiceName          string                         `json:"serviceName,omitempty"`
	Template             corev1.PodTemplateSpec         `json:"template"`
	VolumeClaimTemplates []corev1.PersistentVolumeClaim `json:"volumeClaimTemplates,omitempty"`
}

// Sync computes the CatSet's Pods and PVCs for spec.replicas.
func Sync(_ context.Context, req *hook.SyncRequest) (*hook.SyncResponse, error) {
	cs, err := hook.Decode[CatSet](req.Parent)
	if err != nil {
		return nil, err
	}
	replicas := 1
	if cs.Spec.Replicas != nil {
		replicas = int(*cs.Spec.Replicas)
	}
	return desired(req, &cs.Spec, replicas)
}

// Finalize scales the CatSet to zero, one Pod at a time, and lets it go
// once no Pod is left.
func Finalize(_ context.Context, req *hook.SyncRequest) (*hook.SyncResponse, error) {
	cs, err := hook.Decode[CatSet](req.Parent)
	if err != nil {
		return nil, err
	}
	resp, err := desired(req, &cs.Spec, 0)
	if err != nil {
		return nil, err
	}
	resp.Finalized = len(req.Children[podsKey]) == 0
	return resp, nil
}

const (
	podsKey = "Pod.v1"
	pvcsKey = "PersistentVolumeClaim.v1"
)

// desired lists the Pods for replicas, highest ordinal first, and the PVCs
// of every ordinal that has or had a Pod.
func desired(req *hook.SyncRequest, spec *Spec, replicas int) (*hook.SyncResponse, error) {
	name := req.Parent.GetName()
	pods := map[int]*corev1.Pod{}
	for podName, obj := range req.Children[podsKey] {
		if i, ok := ordinal(name, podName); ok {
			pod, err := hook.Decode[corev1.Pod](obj)
			if err != nil {
				return nil, err
			}
			pods[i] = &pod
		}
	}
	var ordinals []int
	// Scale up in order: a missing Pod comes once every Pod before it is Ready.
	allReady := true
	for i := range replicas {
		if pods[i] != nil || allReady {
			ordinals = append(ordinals, i)
		}
		allReady = allReady && ready(pods[i])
	}
	// Scale down from the top: every surplus Pod but the highest stays.
	var surplus []int
	for i := range pods {
		if i >= replicas {
			surplus = append(surplus, i)
		}
	}
	slices.Sort(surplus)
	if len(surplus) > 0 {
		ordinals = append(ordinals, surplus[:len(surplus)-1]...)
	}
	slices.Sort(ordinals)
	slices.Reverse(ordinals)

	// Claims first, so a new Pod finds its claims.
	claims := map[int]bool{}
	for _, i := range ordinals {
		claims[i] = true
	}
	for pvcName := range req.Children[pvcsKey] {
		for _, t := range spec.VolumeClaimTemplates {
			if i, ok := ordinal(t.Name+"-"+name, pvcName); ok {
				claims[i] = true // kept after a scale-down
			}
		}
	}
	var children []any
	for _, i := range slices.Sorted(maps.Keys(claims)) {
		for _, t := range spec.VolumeClaimTemplates {
			children = append(children, newClaim(name, spec, t, i))
		}
	}
	for _, i := range ordinals {
		children = append(children, newPod(name, spec, i))
	}
	readyPods := 0
	for _, p := range pods {
		if ready(p) {
			readyPods++
		}
	}
	return &hook.SyncResponse{
		Status:   map[string]any{"replicas": int64(len(pods)), "readyReplicas": int64(readyPods)},
		Children: children,
	}, nil
}

// ordinal parses <prefix>-<ordinal>.
func ordinal(prefix, name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, prefix+"-")
	if !ok {
		return 0, false
	}
	i, err := strconv.Atoi(rest)
	return i, err == nil && i >= 0 && strconv.Itoa(i) == rest
}

func ready(pod *corev1.Pod) bool {
	if pod == nil {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// PodName and ClaimName name a CatSet's children.
func PodName(catset string, i int) string { return fmt.Sprintf("%s-%d", catset, i) }

// ClaimName names the PVC of one volumeClaimTemplate for one ordinal.
func ClaimName(template, catset string, i int) string {
	return fmt.Sprintf("%s-%s-%d", template, catset, i)
}

func newPod(catset string, spec *Spec, i int) *corev1.Pod {
	name := PodName(catset, i)
	pod := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Labels:      spec.Template.Labels,
			Annotations: spec.Template.Annotations,
		},
		Spec: *spec.Template.Spec.DeepCopy(),
	}
	pod.Spec.Hostname = name
	pod.Spec.Subdomain = spec.ServiceName
	for _, t := range spec.VolumeClaimTemplates {
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{
			Name:         t.Name,
			VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: ClaimName(t.Name, catset, i)}},
		})
	}
	return pod
}

func newClaim(catset string, spec *Spec, t corev1.PersistentVolumeClaim, i int) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
		ObjectMeta: metav1.ObjectMeta{Name: ClaimName(t.Name, catset, i), Labels: spec.Template.Labels},
		Spec:       t.Spec,
	}
}
