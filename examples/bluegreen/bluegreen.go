// Package bluegreen is a blue-green deployment as a UniversalController
// hook. A BlueGreenDeployment (spec.replicas, spec.selector, spec.template)
// owns two ReplicaSets, <name>-blue and <name>-green, and the Service <name>,
// which selects the Pods of one color: the active one.
//
// A new template goes to the inactive color, which is scaled up to
// spec.replicas (once the Pods of an older template it may still have are
// gone). The Service moves to it only when it is fully available: it runs the
// new template, its controller has seen its latest spec, and all its
// replicas are available. The old color is scaled to zero only after the
// Service has moved. So the Service never selects a color that is not fully
// available, and going back to the previous template before the switch
// simply keeps the active color. The Service appears when the first color is
// available.
//
// status.activeColor is the color the Service selects; status.blue and
// status.green tell each color's replicas, available replicas and whether
// it runs the current template.
package bluegreen

import (
	"context"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"

	"universalcontroller.dev/uc/sdk/go/hook"
)

// Controller is the name of the UniversalController in controller.yaml.
const Controller = "bluegreen-controller"

// GVR is the BlueGreenDeployment resource.
var GVR = schema.GroupVersionResource{Group: "examples.universalcontroller.dev", Version: "v1alpha1", Resource: "bluegreendeployments"}

// The manifests, for programs that install the example.
var (
	//go:embed crd.yaml
	CRD []byte
	//go:embed controller.yaml
	ControllerManifest []byte
)

// The colors.
const (
	Blue  = "blue"
	Green = "green"
)

// LabelColor is on a color's ReplicaSet and Pods, and in the Service's
// selector.
const LabelColor = "examples.universalcontroller.dev/color"

// AnnotationTemplateHash on a ReplicaSet is the hash of the parent's
// spec.template it runs.
const AnnotationTemplateHash = "examples.universalcontroller.dev/template-hash"

// BlueGreenDeployment is the parent, as far as the hook reads it.
type BlueGreenDeployment struct {
	Spec Spec `json:"spec"`
}

// Spec is the desired state of a BlueGreenDeployment.
type Spec struct {
	Replicas int32                  `json:"replicas"`
	Selector metav1.LabelSelector   `json:"selector"`
	Template corev1.PodTemplateSpec `json:"template"`
}

// ReplicaSetName is the name of a color's ReplicaSet.
func ReplicaSetName(parent, color string) string { return parent + "-" + color }

// Sync computes a BlueGreenDeployment's ReplicaSets, Service and status.
func Sync(_ context.Context, req *hook.SyncRequest) (*hook.SyncResponse, error) {
	name := req.Parent.GetName()
	bg, err := hook.Decode[BlueGreenDeployment](req.Parent)
	if err != nil {
		return nil, err
	}
	spec := bg.Spec
	rawSpec, _ := req.Parent["spec"].(map[string]any)
	hash, err := templateHash(rawSpec["template"])
	if err != nil {
		return nil, err
	}
	sets := map[string]*appsv1.ReplicaSet{}
	for _, color := range []string{Blue, Green} {
		if obj := req.Children["ReplicaSet.apps/v1"][ReplicaSetName(name, color)]; obj != nil {
			rs, err := hook.Decode[appsv1.ReplicaSet](obj)
			if err != nil {
				return nil, err
			}
			sets[color] = &rs
		}
	}
	active := ""
	if obj := req.Children["Service.v1"][name]; obj != nil {
		svc, err := hook.Decode[corev1.Service](obj)
		if err != nil {
			return nil, err
		}
		active = svc.Spec.Selector[LabelColor]
	}
	target := targetColor(active, sets, hash)
	serving := active
	if target != active && available(sets[target], spec.Replicas, hash) {
		serving = target
	}

	var children []any
	status := map[string]any{"activeColor": serving, "templateHash": hash}
	for _, color := range []string{Blue, Green} {
		rs := desiredReplicaSet(name, color, spec, hash, active, target, sets[color])
		children = append(children, rs)
		st := map[string]any{"replicas": int64(*rs.Spec.Replicas), "availableReplicas": int64(0), "upToDate": false}
		if cur := sets[color]; cur != nil {
			st["availableReplicas"] = int64(cur.Status.AvailableReplicas)
			st["upToDate"] = cur.Annotations[AnnotationTemplateHash] == hash
		}
		status[color] = st
	}
	if serving != "" {
		children = append(children, service(name, spec, serving))
	}
	return &hook.SyncResponse{Status: status, Children: children}, nil
}

// templateHash is a short hash of the parent's spec.template.
func templateHash(template any) (string, error) {
	b, err := json.Marshal(template) // maps marshal with sorted keys
	if err != nil {
		return "", fmt.Errorf("hash spec.template: %w", err)
	}
	h := fnv.New64a()
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil)), nil
}

// targetColor is the color that runs, or is to run, the current template:
// the active color if it does, else the other color if it does, else the
// inactive color (blue at first).
func targetColor(active string, sets map[string]*appsv1.ReplicaSet, hash string) string {
	inactive := Blue
	if active == Blue {
		inactive = Green
	}
	for _, c := range []string{active, inactive} {
		if rs := sets[c]; rs != nil && rs.Annotations[AnnotationTemplateHash] == hash {
			return c
		}
	}
	return inactive
}

// available says whether a ReplicaSet runs the template, its controller has
// seen its latest spec, and exactly its replicas exist and are available.
func available(rs *appsv1.ReplicaSet, replicas int32, hash string) bool {
	return rs != nil && rs.Annotations[AnnotationTemplateHash] == hash &&
		rs.Spec.Replicas != nil && *rs.Spec.Replicas == replicas &&
		rs.Status.ObservedGeneration >= rs.Generation &&
		rs.Status.Replicas == replicas && rs.Status.AvailableReplicas == replicas
}

// desiredReplicaSet is a color's ReplicaSet: the target color runs the
// current template with spec.replicas, but first drains to zero if it still
// has Pods of another template; the active color, until the Service leaves
// it, keeps its template with spec.replicas; an idle color keeps its
// template with no replicas.
func desiredReplicaSet(parent, color string, spec Spec, hash, active, target string, cur *appsv1.ReplicaSet) *appsv1.ReplicaSet {
	template, templateHash, replicas := spec.Template, hash, int32(0)
	keep := func() {
		if cur != nil {
			template, templateHash = cur.Spec.Template, cur.Annotations[AnnotationTemplateHash]
		}
	}
	switch {
	case color == active && color != target:
		keep()
		replicas = spec.Replicas
	case color != target:
		keep()
	case cur != nil && cur.Annotations[AnnotationTemplateHash] != hash && cur.Status.Replicas > 0:
		keep()
	default:
		replicas = spec.Replicas
	}
	labels := withColor(template.Labels, color)
	template.Labels = labels
	return &appsv1.ReplicaSet{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "ReplicaSet"},
		ObjectMeta: metav1.ObjectMeta{Name: ReplicaSetName(parent, color), Labels: labels,
			Annotations: map[string]string{AnnotationTemplateHash: templateHash}},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: withColor(spec.Selector.MatchLabels, color)},
			Template: template,
		},
	}
}

func withColor(labels map[string]string, color string) map[string]string {
	out := maps.Clone(labels)
	if out == nil {
		out = map[string]string{}
	}
	out[LabelColor] = color
	return out
}

// service selects the Pods of one color, on the ports of the template's
// containers.
func service(name string, spec Spec, color string) *corev1.Service {
	var ports []corev1.ServicePort
	for _, c := range spec.Template.Spec.Containers {
		for _, p := range c.Ports {
			ports = append(ports, corev1.ServicePort{Name: p.Name, Protocol: p.Protocol, Port: p.ContainerPort, TargetPort: intstr.FromInt32(p.ContainerPort)})
		}
	}
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: spec.Template.Labels},
		Spec:       corev1.ServiceSpec{Selector: withColor(spec.Selector.MatchLabels, color), Ports: ports},
	}
}
