package tfjob

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TFJobStatus is the observed state of a TFJob.
type TFJobStatus struct {
	Conditions      []JobCondition                 `json:"conditions,omitempty"`
	ReplicaStatuses map[ReplicaType]*ReplicaStatus `json:"replicaStatuses"`
	StartTime       *metav1.Time                   `json:"startTime,omitempty"`
	CompletionTime  *metav1.Time                   `json:"completionTime,omitempty"`
}

// ReplicaStatus counts the Pods of one replica type by phase.
type ReplicaStatus struct {
	Active    int32 `json:"active"`
	Succeeded int32 `json:"succeeded"`
	Failed    int32 `json:"failed"`
}

// JobCondition is one of the job's conditions.
type JobCondition struct {
	Type               string                 `json:"type"`
	Status             corev1.ConditionStatus `json:"status"`
	Reason             string                 `json:"reason,omitempty"`
	Message            string                 `json:"message,omitempty"`
	LastTransitionTime metav1.Time            `json:"lastTransitionTime"`
}

// The job's condition types, tf-operator's.
const (
	Created    = "Created"
	Running    = "Running"
	Restarting = "Restarting"
	Succeeded  = "Succeeded"
	Failed     = "Failed"
)

// finished says whether the job succeeded or failed.
func (s *TFJobStatus) finished() bool {
	return slices.ContainsFunc(s.Conditions, func(c JobCondition) bool {
		return (c.Type == Succeeded || c.Type == Failed) && c.Status == corev1.ConditionTrue
	})
}

// nextStatus counts the replicas' Pods and moves the job's conditions on,
// with tf-operator's rules; a finished job's conditions stay as they are.
func nextStatus(job *TFJob, replicas []replica, now metav1.Time) TFJobStatus {
	st := TFJobStatus{Conditions: slices.Clone(job.Status.Conditions), ReplicaStatuses: map[ReplicaType]*ReplicaStatus{},
		StartTime: job.Status.StartTime, CompletionTime: job.Status.CompletionTime}
	if st.StartTime == nil {
		st.StartTime = &now
	}
	failures := map[ReplicaType]int{}
	restarting := map[ReplicaType]int{}
	for t := range job.Spec.TFReplicaSpecs {
		st.ReplicaStatuses[t] = &ReplicaStatus{}
	}
	for _, r := range replicas {
		count := st.ReplicaStatuses[r.typ]
		switch r.phase() {
		case corev1.PodRunning:
			count.Active++
		case corev1.PodSucceeded:
			count.Succeeded++
		case corev1.PodFailed:
			count.Failed++
			if r.restart {
				restarting[r.typ]++
			} else {
				failures[r.typ]++
			}
		}
	}
	if !st.finished() {
		moveOn(job, &st, replicas, failures, restarting, now)
	}
	if st.finished() && st.CompletionTime == nil {
		st.CompletionTime = &now
	}
	return st
}

// moveOn sets the conditions of an unfinished job.
func moveOn(job *TFJob, st *TFJobStatus, replicas []replica, failures, restarting map[ReplicaType]int, now metav1.Time) {
	set := func(typ, reason, message string) {
		st.Conditions = setCondition(st.Conditions, JobCondition{Type: typ, Status: corev1.ConditionTrue,
			Reason: reason, Message: fmt.Sprintf("TFJob %s/%s %s", job.Namespace, job.Name, message), LastTransitionTime: now})
	}
	set(Created, "TFJobCreated", "is created.")
	switch t, n := first(failures); {
	case n > 0:
		set(Failed, "TFJobFailed", fmt.Sprintf("has failed because %d %s replica(s) failed.", n, t))
	case succeeded(job, replicas, st.ReplicaStatuses):
		set(Succeeded, "TFJobSucceeded", "successfully completed.")
	default:
		if t, n := first(restarting); n > 0 {
			set(Restarting, "TFJobRestarting", fmt.Sprintf("is restarting because %d %s replica(s) failed.", n, t))
		} else if running(job, st.ReplicaStatuses) {
			set(Running, "TFJobRunning", "is running.")
		}
	}
}

// first is the first replica type in the map (in a fixed order) and its
// count, or 0.
func first(counts map[ReplicaType]int) (ReplicaType, int) {
	for _, t := range []ReplicaType{Chief, PS, Worker} {
		if counts[t] > 0 {
			return t, counts[t]
		}
	}
	return "", 0
}

// succeeded: every Chief succeeded; without a Chief, worker 0 did, or every
// worker with successPolicy AllWorkers.
func succeeded(job *TFJob, replicas []replica, counts map[ReplicaType]*ReplicaStatus) bool {
	if spec := job.Spec.TFReplicaSpecs[Chief]; spec != nil {
		return int(counts[Chief].Succeeded) == spec.replicas()
	}
	spec := job.Spec.TFReplicaSpecs[Worker]
	if spec == nil {
		return false
	}
	worker0 := slices.ContainsFunc(replicas, func(r replica) bool {
		return r.typ == Worker && r.index == 0 && r.phase() == corev1.PodSucceeded
	})
	return int(counts[Worker].Succeeded) == spec.replicas() || (worker0 && job.Spec.SuccessPolicy != "AllWorkers")
}

// running: the Chief runs; without a Chief, a worker does.
func running(job *TFJob, counts map[ReplicaType]*ReplicaStatus) bool {
	if job.Spec.TFReplicaSpecs[Chief] != nil {
		return counts[Chief].Active > 0
	}
	return counts[Worker] != nil && counts[Worker].Active > 0
}

// setCondition puts c into the conditions as tf-operator does: a condition
// already there with the same status and reason is kept as it is; Running
// and Restarting replace each other; Succeeded and Failed turn Running
// False.
func setCondition(conditions []JobCondition, c JobCondition) []JobCondition {
	if i := slices.IndexFunc(conditions, func(o JobCondition) bool { return o.Type == c.Type }); i >= 0 &&
		conditions[i].Status == c.Status && conditions[i].Reason == c.Reason {
		return conditions
	}
	var out []JobCondition
	for _, o := range conditions {
		switch {
		case o.Type == c.Type, o.Type == Running && c.Type == Restarting, o.Type == Restarting && c.Type == Running:
			continue
		case o.Type == Running && o.Status == corev1.ConditionTrue && (c.Type == Succeeded || c.Type == Failed):
			o.Status, o.LastTransitionTime = corev1.ConditionFalse, c.LastTransitionTime
		}
		out = append(out, o)
	}
	return append(out, c)
}
