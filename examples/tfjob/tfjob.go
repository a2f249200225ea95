// Package tfjob is thesis use case 2, Kubeflow's tf-operator as a
// UniversalController hook. A TFJob lists its replica types (PS, Worker,
// Chief) in spec.tfReplicaSpecs; the hook asks for one Pod and one headless
// Service per replica, named <job>-<type>-<index>, and gives every Pod the
// TF_CONFIG environment variable that tells TensorFlow the cluster (every
// replica's Service address) and its own task.
//
// The status follows tf-operator: replicaStatuses counts the active
// (Running), succeeded and failed Pods of each type, and the conditions
// Created, Running, Restarting, Succeeded and Failed tell where the job is.
// The job succeeds when its Chief does, or, without a Chief, when worker 0
// does (every worker with successPolicy AllWorkers). A failed Pod is
// restarted — left out of the reply, so uc deletes it, and asked for again
// once gone — when its type's restartPolicy is OnFailure or Always, or
// ExitCode with an exit code of 128 or more (killed by a signal); any other
// failure fails the job. Once the job is finished no Pod is created any
// more, and runPolicy.cleanPodPolicy says which Pods go (default: those
// still running).
package tfjob

import (
	"context"
	_ "embed"
	"encoding/json"
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
const Controller = "tfjob-controller"

// GVR is the TFJob resource.
var GVR = schema.GroupVersionResource{Group: "examples.universalcontroller.dev", Version: "v1alpha1", Resource: "tfjobs"}

// The manifests, for programs that install the example.
var (
	//go:embed crd.yaml
	CRD []byte
	//go:embed controller.yaml
	ControllerManifest []byte
)

// ReplicaType is a role in the TensorFlow cluster.
type ReplicaType string

// The replica types.
const (
	Chief  ReplicaType = "Chief"
	PS     ReplicaType = "PS"
	Worker ReplicaType = "Worker"
)

// RestartPolicy says what happens when a replica's Pod fails.
type RestartPolicy string

// The restart policies.
const (
	RestartNever     RestartPolicy = "Never"
	RestartOnFailure RestartPolicy = "OnFailure"
	RestartAlways    RestartPolicy = "Always"
	RestartExitCode  RestartPolicy = "ExitCode"
)

// TFJob is the parent.
type TFJob struct {
	metav1.ObjectMeta `json:"metadata"`
	Spec              TFJobSpec   `json:"spec"`
	Status            TFJobStatus `json:"status"`
}

// TFJobSpec is the desired state of a TFJob.
type TFJobSpec struct {
	TFReplicaSpecs map[ReplicaType]*ReplicaSpec `json:"tfReplicaSpecs"`
	// SuccessPolicy "AllWorkers" waits for every worker of a job without a
	// Chief; "" for worker 0.
	SuccessPolicy string `json:"successPolicy,omitempty"`
	RunPolicy     struct {
		// CleanPodPolicy is Running (the default), All or None.
		CleanPodPolicy string `json:"cleanPodPolicy,omitempty"`
	} `json:"runPolicy"`
}

// ReplicaSpec describes the replicas of one type.
type ReplicaSpec struct {
	Replicas      *int32                 `json:"replicas,omitempty"`
	RestartPolicy RestartPolicy          `json:"restartPolicy,omitempty"`
	Template      corev1.PodTemplateSpec `json:"template"`
}

// replicas is the number of replicas, 1 by default.
func (s *ReplicaSpec) replicas() int {
	if s.Replicas == nil {
		return 1
	}
	return int(*s.Replicas)
}

// The labels of every Pod and Service, as tf-operator's.
const (
	LabelJobName      = "training.kubeflow.org/job-name"
	LabelReplicaType  = "training.kubeflow.org/replica-type"
	LabelReplicaIndex = "training.kubeflow.org/replica-index"
)

// The container whose ports and exit code count, and its port.
const (
	ContainerName = "tensorflow"
	PortName      = "tfjob-port"
	DefaultPort   = 2222
)

// ReplicaName is the name of a replica's Pod and Service.
func ReplicaName(job string, t ReplicaType, index int) string {
	return fmt.Sprintf("%s-%s-%d", job, strings.ToLower(string(t)), index)
}

// Sync computes a TFJob's Pods, Services and status.
func Sync(_ context.Context, req *hook.SyncRequest) (*hook.SyncResponse, error) {
	job, err := hook.Decode[TFJob](req.Parent)
	if err != nil {
		return nil, err
	}
	pods := map[string]*corev1.Pod{}
	for name, obj := range req.Children["Pod.v1"] {
		pod, err := hook.Decode[corev1.Pod](obj)
		if err != nil {
			return nil, err
		}
		pods[name] = &pod
	}
	replicas := observe(&job, pods)
	status := nextStatus(&job, replicas, metav1.Now())
	children, err := desired(&job, replicas, status.finished())
	if err != nil {
		return nil, err
	}
	out, err := hook.ObjectOf(&status)
	if err != nil {
		return nil, err
	}
	return &hook.SyncResponse{Status: out, Children: children}, nil
}

// replica is one replica of a job and its Pod, if observed.
type replica struct {
	typ   ReplicaType
	index int
	spec  *ReplicaSpec
	pod   *corev1.Pod
	// restart is set for a failed Pod its restart policy restarts.
	restart bool
}

func (r replica) phase() corev1.PodPhase {
	if r.pod == nil {
		return ""
	}
	return r.pod.Status.Phase
}

// observe lists the job's replicas, by type in a fixed order and by index.
func observe(job *TFJob, pods map[string]*corev1.Pod) []replica {
	var out []replica
	for _, t := range slices.Sorted(maps.Keys(job.Spec.TFReplicaSpecs)) {
		spec := job.Spec.TFReplicaSpecs[t]
		for i := range spec.replicas() {
			r := replica{typ: t, index: i, spec: spec, pod: pods[ReplicaName(job.Name, t, i)]}
			r.restart = r.phase() == corev1.PodFailed && restarts(spec.RestartPolicy, r.pod)
			out = append(out, r)
		}
	}
	return out
}

// restarts says whether a failed Pod is restarted, as tf-operator decides.
func restarts(policy RestartPolicy, pod *corev1.Pod) bool {
	switch policy {
	case RestartOnFailure, RestartAlways:
		return true
	case RestartExitCode:
		code, ok := exitCode(pod)
		// 128 and above: killed by a signal. A Pod that failed without
		// its container terminating (evicted, say) is retried too.
		return !ok || code >= 128
	}
	return false
}

// exitCode is the exit code of the tensorflow container, or else of the
// first container that terminated.
func exitCode(pod *corev1.Pod) (int32, bool) {
	var first *corev1.ContainerStateTerminated
	for _, s := range pod.Status.ContainerStatuses {
		switch t := s.State.Terminated; {
		case t != nil && s.Name == ContainerName:
			return t.ExitCode, true
		case t != nil && first == nil:
			first = t
		}
	}
	if first == nil {
		return 0, false
	}
	return first.ExitCode, true
}

// desired lists the children: each replica's Service, and its Pod unless
// the Pod is being restarted. A finished job creates and restarts no Pod
// any more, and keeps only the Pods (and their Services) its
// cleanPodPolicy spares.
func desired(job *TFJob, replicas []replica, finished bool) ([]any, error) {
	cluster := clusterSpec(job)
	var out []any
	for _, r := range replicas {
		if finished && (r.pod == nil || cleaned(job.Spec.RunPolicy.CleanPodPolicy, r.phase())) {
			continue
		}
		out = append(out, newService(job, r))
		if !r.restart || finished {
			pod, err := newPod(job, r, cluster)
			if err != nil {
				return nil, err
			}
			out = append(out, pod)
		}
	}
	return out, nil
}

// cleaned says whether a finished job's Pod in that phase goes.
func cleaned(policy string, phase corev1.PodPhase) bool {
	switch policy {
	case "None":
		return false
	case "All":
		return true
	}
	return phase == corev1.PodRunning || phase == corev1.PodPending
}

// clusterSpec is TF_CONFIG's cluster: the Service addresses by replica type.
func clusterSpec(job *TFJob) map[string][]string {
	cluster := map[string][]string{}
	for t, spec := range job.Spec.TFReplicaSpecs {
		for i := range spec.replicas() {
			addr := fmt.Sprintf("%s.%s.svc:%d", ReplicaName(job.Name, t, i), job.Namespace, port(spec))
			cluster[strings.ToLower(string(t))] = append(cluster[strings.ToLower(string(t))], addr)
		}
	}
	return cluster
}

// port is the tensorflow container's tfjob-port, 2222 by default.
func port(spec *ReplicaSpec) int32 {
	for _, c := range spec.Template.Spec.Containers {
		for _, p := range c.Ports {
			if c.Name == ContainerName && p.Name == PortName {
				return p.ContainerPort
			}
		}
	}
	return DefaultPort
}

func labels(job *TFJob, r replica) map[string]string {
	return map[string]string{
		LabelJobName:      job.Name,
		LabelReplicaType:  strings.ToLower(string(r.typ)),
		LabelReplicaIndex: strconv.Itoa(r.index),
	}
}

// newPod is a replica's Pod: the template of its type, with the replica's
// labels, its restart policy (ExitCode is the hook's: the Pod's is Never)
// and TF_CONFIG in every container.
func newPod(job *TFJob, r replica, cluster map[string][]string) (*corev1.Pod, error) {
	tfConfig, err := json.Marshal(map[string]any{
		"cluster":     cluster,
		"task":        map[string]any{"type": strings.ToLower(string(r.typ)), "index": r.index},
		"environment": "cloud",
	})
	if err != nil {
		return nil, fmt.Errorf("TF_CONFIG: %w", err)
	}
	t := r.spec.Template.DeepCopy()
	pod := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: ReplicaName(job.Name, r.typ, r.index), Labels: t.Labels, Annotations: t.Annotations},
		Spec:       t.Spec,
	}
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	for k, v := range labels(job, r) {
		pod.Labels[k] = v
	}
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	if r.spec.RestartPolicy == RestartOnFailure || r.spec.RestartPolicy == RestartAlways {
		pod.Spec.RestartPolicy = corev1.RestartPolicy(r.spec.RestartPolicy)
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		c.Env = append(c.Env, corev1.EnvVar{Name: "TF_CONFIG", Value: string(tfConfig)})
	}
	return pod, nil
}

// newService is a replica's headless Service, which gives its Pod the
// address in TF_CONFIG.
func newService(job *TFJob, r replica) *corev1.Service {
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: ReplicaName(job.Name, r.typ, r.index), Labels: labels(job, r)},
		Spec: corev1.ServiceSpec{
			ClusterIP: corev1.ClusterIPNone,
			Selector:  labels(job, r),
			Ports:     []corev1.ServicePort{{Name: PortName, Port: port(r.spec)}},
		},
	}
}
