package e2e

// The TFJob example (thesis use case 2, tf-operator as a hook) on the test
// bed. kwok makes the Pods Running; the test bed's own kwok stage completes
// those labelled testbed.universalcontroller.dev/complete=true, and the test
// fails a Pod by writing its status, as a kubelet would.

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	"universalcontroller.dev/uc/examples/tfjob"
)

// Pods labelled so are completed by the test bed's kwok stage
// (test/testbed/stages/pod-complete-labelled.yaml), after the delay in the
// annotation.
const (
	labelComplete      = "testbed.universalcontroller.dev/complete"
	annotationComplete = "testbed.universalcontroller.dev/complete-after"
)

// tfReplicas is a replica type of a TFJob: replicas, restart policy, the
// tensorflow container's port, and whether kwok completes its Pods.
type tfReplicas struct {
	replicas int64
	policy   tfjob.RestartPolicy
	port     int64
	complete bool
}

func (r tfReplicas) spec() map[string]any {
	meta := map[string]any{}
	if r.complete {
		meta["labels"] = map[string]any{labelComplete: "true"}
		meta["annotations"] = map[string]any{annotationComplete: "2s"} // Running for a while first
	}
	return map[string]any{"replicas": r.replicas, "restartPolicy": string(r.policy),
		"template": map[string]any{"metadata": meta, "spec": map[string]any{"containers": []any{tfContainer(r.port)}}}}
}

// tfContainer is the tensorflow container listening on port.
func tfContainer(port int64) map[string]any {
	return map[string]any{"name": tfjob.ContainerName, "image": "tensorflow/tensorflow:2.16.1",
		"ports": []any{map[string]any{"name": tfjob.PortName, "containerPort": port}}}
}

func createTFJob(t *testing.T, ns, name, successPolicy string, replicas map[tfjob.ReplicaType]tfReplicas) {
	t.Helper()
	specs := map[string]any{}
	for typ, r := range replicas {
		specs[string(typ)] = r.spec()
	}
	spec := map[string]any{"tfReplicaSpecs": specs}
	if successPolicy != "" {
		spec["successPolicy"] = successPolicy
	}
	if _, err := env.dyn.Resource(tfjob.GVR).Namespace(ns).Create(t.Context(), &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "examples.universalcontroller.dev/v1alpha1", "kind": "TFJob",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     spec,
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func getTFJob(ctx context.Context, ns, name string) (*tfjob.TFJob, error) {
	u, err := env.dyn.Resource(tfjob.GVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	var job tfjob.TFJob
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &job); err != nil {
		return nil, err
	}
	return &job, nil
}

// conditionsAre checks the job's conditions: each of want (type → status)
// is there with that status.
func conditionsAre(job *tfjob.TFJob, want map[string]corev1.ConditionStatus) error {
	for typ, status := range want {
		i := slices.IndexFunc(job.Status.Conditions, func(c tfjob.JobCondition) bool { return c.Type == typ })
		if i < 0 || job.Status.Conditions[i].Status != status {
			return fmt.Errorf("%s: condition %s is not %s: %+v", job.Name, typ, status, job.Status.Conditions)
		}
	}
	return nil
}

// jobPods are the Pods of a job by name.
func jobPods(ctx context.Context, ns, job string) (map[string]corev1.Pod, error) {
	list, err := env.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: tfjob.LabelJobName + "=" + job})
	if err != nil {
		return nil, err
	}
	out := map[string]corev1.Pod{}
	for _, p := range list.Items {
		out[p.Name] = p
	}
	return out, nil
}

func jobServices(ctx context.Context, ns, job string) (map[string]corev1.Service, error) {
	list, err := env.kube.CoreV1().Services(ns).List(ctx, metav1.ListOptions{LabelSelector: tfjob.LabelJobName + "=" + job})
	if err != nil {
		return nil, err
	}
	out := map[string]corev1.Service{}
	for _, s := range list.Items {
		out[s.Name] = s
	}
	return out, nil
}

// podsAre checks that exactly the named Pods exist, in those phases.
func podsAre(ctx context.Context, ns, job string, want map[string]corev1.PodPhase) error {
	pods, err := jobPods(ctx, ns, job)
	if err != nil {
		return err
	}
	got := map[string]corev1.PodPhase{}
	for name, p := range pods {
		got[name] = p.Status.Phase
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		return fmt.Errorf("%s: pods %v, want %v", job, got, want)
	}
	return nil
}

// servicesAre checks that exactly the named Services exist, headless, each
// selecting its replica's Pod, controlled by the job.
func servicesAre(ctx context.Context, ns string, job *tfjob.TFJob, names ...string) error {
	svcs, err := jobServices(ctx, ns, job.Name)
	if err != nil {
		return err
	}
	if got := slices.Sorted(maps.Keys(svcs)); !slices.Equal(got, slices.Sorted(slices.Values(names))) {
		return fmt.Errorf("%s: services %v, want %v", job.Name, got, names)
	}
	for name, s := range svcs {
		if s.Spec.ClusterIP != corev1.ClusterIPNone || !strings.HasSuffix(name, "-"+s.Spec.Selector[tfjob.LabelReplicaIndex]) {
			return fmt.Errorf("service %s: clusterIP %s, selector %v", name, s.Spec.ClusterIP, s.Spec.Selector)
		}
		if err := controlledBy(&s, job.UID); err != nil {
			return err
		}
	}
	return nil
}

// TestTFJob: a TFJob of 1 PS and 2 workers (successPolicy AllWorkers) gets
// a Pod and a headless Service per replica, each Pod with TF_CONFIG naming
// the cluster; kwok runs the Pods and completes the workers, and the job
// goes Created → Running → Succeeded, after which the still running PS Pod
// is cleaned up (cleanPodPolicy Running). A job with a Chief succeeds when
// the Chief does, its workers still running. With restartPolicy ExitCode, a
// worker killed by a signal (exit code 137) is restarted — a new Pod behind
// the same Service — and one that exits 1 fails the job. A changed port
// recreates the Pods (Recreate) and updates the Services in place (the same
// UIDs). Deleting a job deletes its children.
func TestTFJob(t *testing.T) {
	ctx := t.Context()
	ns := runExample(t, "TFJob", "examples/tfjob", tfjob.GVR, tfjob.Controller, tfjob.Sync)
	jobs := recordChanges(t, tfjob.GVR, ns)

	start := time.Now()
	createTFJob(t, ns, "mnist", "AllWorkers", map[tfjob.ReplicaType]tfReplicas{
		tfjob.PS:     {replicas: 1, policy: tfjob.RestartNever, port: 2222},
		tfjob.Worker: {replicas: 2, policy: tfjob.RestartExitCode, port: 2222, complete: true},
	})
	createTFJob(t, ns, "chief", "", map[tfjob.ReplicaType]tfReplicas{
		tfjob.Chief:  {replicas: 1, policy: tfjob.RestartNever, port: 2222, complete: true},
		tfjob.PS:     {replicas: 1, policy: tfjob.RestartNever, port: 2222},
		tfjob.Worker: {replicas: 2, policy: tfjob.RestartNever, port: 2222},
	})
	createTFJob(t, ns, "restart", "", map[tfjob.ReplicaType]tfReplicas{
		tfjob.PS:     {replicas: 1, policy: tfjob.RestartNever, port: 2222},
		tfjob.Worker: {replicas: 2, policy: tfjob.RestartExitCode, port: 2222},
	})

	t.Run("Succeeded", func(t *testing.T) {
		// Before the workers complete, every replica has its Pod and Service.
		eventually(t, time.Minute, func() error {
			job, err := getTFJob(ctx, ns, "mnist")
			if err != nil {
				return err
			}
			if err := servicesAre(ctx, ns, job, "mnist-ps-0", "mnist-worker-0", "mnist-worker-1"); err != nil {
				return err
			}
			return tfConfigs(ctx, ns, "mnist", map[string][]string{
				"ps": {"mnist-ps-0." + ns + ".svc:2222"}, "worker": {"mnist-worker-0." + ns + ".svc:2222", "mnist-worker-1." + ns + ".svc:2222"}})
		})
		var job *tfjob.TFJob
		eventually(t, time.Minute, func() error {
			var err error
			if job, err = getTFJob(ctx, ns, "mnist"); err != nil {
				return err
			}
			if err := conditionsAre(job, map[string]corev1.ConditionStatus{tfjob.Created: "True", tfjob.Running: "False", tfjob.Succeeded: "True"}); err != nil {
				return err
			}
			// The status catches up with the PS Pod's cleanup.
			if ps, w := job.Status.ReplicaStatuses[tfjob.PS], job.Status.ReplicaStatuses[tfjob.Worker]; w == nil || w.Succeeded != 2 || ps == nil || ps.Active != 0 || job.Status.CompletionTime == nil {
				return fmt.Errorf("replicaStatuses PS %+v, Worker %+v, completionTime %v", ps, w, job.Status.CompletionTime)
			}
			// cleanPodPolicy Running: the PS Pod and its Service go.
			if err := podsAre(ctx, ns, "mnist", map[string]corev1.PodPhase{"mnist-worker-0": corev1.PodSucceeded, "mnist-worker-1": corev1.PodSucceeded}); err != nil {
				return err
			}
			return servicesAre(ctx, ns, job, "mnist-worker-0", "mnist-worker-1")
		})
		t.Logf("mnist Succeeded %s after its creation; startTime %s, completionTime %s; replicaStatuses PS %+v, Worker %+v",
			time.Since(start).Round(time.Millisecond), job.Status.StartTime, job.Status.CompletionTime,
			*job.Status.ReplicaStatuses[tfjob.PS], *job.Status.ReplicaStatuses[tfjob.Worker])
		if seen := jobs.conditions("mnist"); !slices.Contains(seen, "Running=True") {
			t.Errorf("mnist was never seen Running: %v", seen)
		}
	})

	t.Run("Chief", func(t *testing.T) {
		eventually(t, time.Minute, func() error {
			job, err := getTFJob(ctx, ns, "chief")
			if err != nil {
				return err
			}
			if err := conditionsAre(job, map[string]corev1.ConditionStatus{tfjob.Succeeded: "True"}); err != nil {
				return err
			}
			// The workers never completed: the Chief decided.
			if w := job.Status.ReplicaStatuses[tfjob.Worker]; w.Succeeded != 0 {
				return fmt.Errorf("workers %+v", w)
			}
			return podsAre(ctx, ns, "chief", map[string]corev1.PodPhase{"chief-chief-0": corev1.PodSucceeded})
		})
	})

	t.Run("Restart", func(t *testing.T) {
		restartAndFail(t, ns, jobs)
	})

	t.Run("GC", func(t *testing.T) {
		if err := env.dyn.Resource(tfjob.GVR).Namespace(ns).Delete(ctx, "mnist", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 2*time.Minute, func() error {
			pods, err := jobPods(ctx, ns, "mnist")
			if err != nil {
				return err
			}
			svcs, err := jobServices(ctx, ns, "mnist")
			if err != nil {
				return err
			}
			if len(pods)+len(svcs) > 0 {
				return fmt.Errorf("%d pods and %d services outlive their TFJob", len(pods), len(svcs))
			}
			return nil
		})
	})
}

// restartAndFail runs the job "restart" (1 PS, 2 workers with restartPolicy
// ExitCode, never completed by kwok) through a restart, a port change and a
// failure.
func restartAndFail(t *testing.T, ns string, jobs *changeRecord) {
	ctx := t.Context()
	running := func() (map[string]corev1.Pod, error) {
		job, err := getTFJob(ctx, ns, "restart")
		if err != nil {
			return nil, err
		}
		if err := conditionsAre(job, map[string]corev1.ConditionStatus{tfjob.Running: "True"}); err != nil {
			return nil, err
		}
		if err := podsAre(ctx, ns, "restart", map[string]corev1.PodPhase{"restart-ps-0": "Running", "restart-worker-0": "Running", "restart-worker-1": "Running"}); err != nil {
			return nil, err
		}
		return jobPods(ctx, ns, "restart")
	}
	var before, afterRestart map[string]corev1.Pod
	var svcsBefore map[string]corev1.Service
	if !t.Run("running", func(t *testing.T) {
		eventually(t, time.Minute, func() (err error) { before, err = running(); return err })
		var err error
		svcsBefore, err = jobServices(ctx, ns, "restart")
		if err != nil {
			t.Fatal(err)
		}
	}) {
		return
	}

	if !t.Run("a worker killed by a signal is restarted", func(t *testing.T) {
		// Killed by a signal: retryable. A new Pod, the same Service.
		failPod(t, ns, "restart-worker-1", 137)
		eventually(t, time.Minute, func() error {
			now, err := running()
			if err != nil {
				return err
			}
			if now["restart-worker-1"].UID == before["restart-worker-1"].UID {
				return fmt.Errorf("restart-worker-1 was not recreated")
			}
			return nil
		})
		if seen := jobs.conditions("restart"); !slices.Contains(seen, "Restarting=True") {
			t.Errorf("the job was never seen Restarting: %v", seen)
		}
		svcsAfter, err := jobServices(ctx, ns, "restart")
		if err != nil {
			t.Fatal(err)
		}
		if svcsAfter["restart-worker-1"].UID != svcsBefore["restart-worker-1"].UID {
			t.Errorf("the restarted worker's Service was recreated")
		}
		afterRestart, _ = jobPods(ctx, ns, "restart")
		if afterRestart["restart-worker-0"].UID != before["restart-worker-0"].UID || afterRestart["restart-ps-0"].UID != before["restart-ps-0"].UID {
			t.Errorf("other Pods than the failed one were recreated")
		}
	}) {
		return
	}

	if !t.Run("a new worker port recreates the Pods and updates the Services in place", func(t *testing.T) {
		// A new worker port: every Pod's TF_CONFIG changes, so every Pod is
		// recreated; the workers' Services are updated in place.
		patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"tfReplicaSpecs": map[string]any{"Worker": map[string]any{
			"template": map[string]any{"spec": map[string]any{"containers": []any{tfContainer(2223)}}}}}}})
		if _, err := env.dyn.Resource(tfjob.GVR).Namespace(ns).Patch(ctx, "restart", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		var svcs map[string]corev1.Service
		eventually(t, time.Minute, func() error {
			now, err := running()
			if err != nil {
				return err
			}
			for name, p := range now {
				if p.UID == afterRestart[name].UID {
					return fmt.Errorf("%s was not recreated", name)
				}
			}
			if svcs, err = jobServices(ctx, ns, "restart"); err != nil {
				return err
			}
			for _, name := range []string{"restart-worker-0", "restart-worker-1"} {
				if svcs[name].Spec.Ports[0].Port != 2223 {
					return fmt.Errorf("service %s has port %d", name, svcs[name].Spec.Ports[0].Port)
				}
			}
			return tfConfigs(ctx, ns, "restart", map[string][]string{
				"ps": {"restart-ps-0." + ns + ".svc:2222"}, "worker": {"restart-worker-0." + ns + ".svc:2223", "restart-worker-1." + ns + ".svc:2223"}})
		})

		for name, s := range svcs {
			if s.UID != svcsBefore[name].UID {
				t.Errorf("InPlace: service %s was recreated", name)
			}
		}
	}) {
		return
	}

	t.Run("exit code 1 fails the job", func(t *testing.T) {
		// Exit code 1: a permanent error fails the job; the Pods still running
		// are cleaned up, the failed one is kept.
		failPod(t, ns, "restart-worker-0", 1)
		eventually(t, time.Minute, func() error {
			job, err := getTFJob(ctx, ns, "restart")
			if err != nil {
				return err
			}
			if err := conditionsAre(job, map[string]corev1.ConditionStatus{tfjob.Failed: "True", tfjob.Running: "False"}); err != nil {
				return err
			}
			if job.Status.CompletionTime == nil || job.Status.ReplicaStatuses[tfjob.Worker].Failed != 1 {
				return fmt.Errorf("completionTime %v, workers %+v", job.Status.CompletionTime, job.Status.ReplicaStatuses[tfjob.Worker])
			}
			return podsAre(ctx, ns, "restart", map[string]corev1.PodPhase{"restart-worker-0": corev1.PodFailed})
		})
		t.Logf("conditions seen: %v", jobs.conditions("restart"))
	})
}

// failPod writes a Pod's status as a kubelet would when its tensorflow
// container exited with code.
func failPod(t *testing.T, ns, name string, code int32) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pod, err := env.kube.CoreV1().Pods(ns).Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		pod.Status.Phase = corev1.PodFailed
		for i := range pod.Status.ContainerStatuses {
			s := &pod.Status.ContainerStatuses[i]
			s.Ready, s.Started = false, nil
			s.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: "Error",
				StartedAt: metav1.Now(), FinishedAt: metav1.Now()}}
		}
		_, err = env.kube.CoreV1().Pods(ns).UpdateStatus(t.Context(), pod, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("fail pod %s: %v", name, err)
	}
}

// tfConfigs checks every Pod of the job has TF_CONFIG with that cluster and
// its own task.
func tfConfigs(ctx context.Context, ns, job string, cluster map[string][]string) error {
	pods, err := jobPods(ctx, ns, job)
	if err != nil {
		return err
	}
	if len(pods) == 0 {
		return fmt.Errorf("%s has no pods", job)
	}
	for name, p := range pods {
		var config struct {
			Cluster map[string][]string `json:"cluster"`
			Task    struct {
				Type  string `json:"type"`
				Index int    `json:"index"`
			} `json:"task"`
		}
		for _, e := range p.Spec.Containers[0].Env {
			if e.Name == "TF_CONFIG" {
				if err := json.Unmarshal([]byte(e.Value), &config); err != nil {
					return fmt.Errorf("pod %s: TF_CONFIG: %w", name, err)
				}
			}
		}
		if fmt.Sprint(config.Cluster) != fmt.Sprint(cluster) {
			return fmt.Errorf("pod %s: TF_CONFIG cluster %v, want %v", name, config.Cluster, cluster)
		}
		if want := fmt.Sprintf("%s-%s-%d", job, config.Task.Type, config.Task.Index); want != name {
			return fmt.Errorf("pod %s: TF_CONFIG task %+v", name, config.Task)
		}
	}
	return nil
}
