package tfjob

import (
	"encoding/json"
	"maps"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"universalcontroller.dev/uc/examples/internal/exampletest"
	"universalcontroller.dev/uc/schemas/v1alpha1"
	"universalcontroller.dev/uc/sdk/go/hook"
)

// podState is an observed Pod: its phase and, when it failed, the exit code
// of its tensorflow container.
type podState struct {
	phase    corev1.PodPhase
	exitCode int32
}

// request is a sync request for the TFJob "j" with spec, status conditions
// (type → status) and the observed Pods by name.
func request(t *testing.T, spec map[string]any, conditions map[string]string, pods map[string]podState) *hook.SyncRequest {
	t.Helper()
	var conds []any
	for typ, status := range conditions {
		conds = append(conds, map[string]any{"type": typ, "status": status, "reason": "TFJob" + typ, "lastTransitionTime": "2024-01-01T00:00:00Z"})
	}
	req := &hook.SyncRequest{
		Parent: hook.Object{
			"apiVersion": "examples.universalcontroller.dev/v1alpha1", "kind": "TFJob",
			"metadata": map[string]any{"name": "j", "namespace": "ns"},
			"spec":     spec,
			"status":   map[string]any{"conditions": conds},
		},
		Children: hook.GroupedObjects{"Pod.v1": {}, "Service.v1": {}},
	}
	for name, s := range pods {
		pod := corev1.Pod{Status: corev1.PodStatus{Phase: s.phase}}
		pod.Name = name
		if s.phase == corev1.PodFailed {
			pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: ContainerName,
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: s.exitCode}}}}
		}
		obj, err := hook.ObjectOf(&pod)
		if err != nil {
			t.Fatal(err)
		}
		req.Children["Pod.v1"][name] = obj
	}
	return req
}

// replicaSpecs is a spec.tfReplicaSpecs: replica type → replicas and
// restart policy.
func replicaSpecs(specs map[ReplicaType]ReplicaSpec) map[string]any {
	out := map[string]any{}
	for typ, s := range specs {
		out[string(typ)] = map[string]any{
			"replicas": int64(*s.Replicas), "restartPolicy": string(s.RestartPolicy),
			"template": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": ContainerName, "image": "tf"}}}},
		}
	}
	return out
}

func n(i int32) *int32 { return &i }

// psWorkers is a job of 1 PS and 2 workers with the workers' restart policy.
func psWorkers(policy RestartPolicy, extra map[string]any) map[string]any {
	spec := map[string]any{"tfReplicaSpecs": replicaSpecs(map[ReplicaType]ReplicaSpec{
		PS:     {Replicas: n(1), RestartPolicy: RestartNever},
		Worker: {Replicas: n(2), RestartPolicy: policy},
	})}
	maps.Copy(spec, extra)
	return spec
}

var running3 = map[string]podState{"j-ps-0": {phase: corev1.PodRunning}, "j-worker-0": {phase: corev1.PodRunning}, "j-worker-1": {phase: corev1.PodRunning}}

// with is running3 with some Pods changed.
func with(pods map[string]podState) map[string]podState {
	out := maps.Clone(running3)
	maps.Copy(out, pods)
	return out
}

func TestSync(t *testing.T) {
	failed := func(code int32) podState { return podState{phase: corev1.PodFailed, exitCode: code} }
	succeeded := podState{phase: corev1.PodSucceeded}
	for _, tc := range []struct {
		name       string
		spec       map[string]any
		conditions map[string]string
		pods       map[string]podState
		// wantTrue are the conditions that must be True, wantFalse False;
		// wantPods and wantServices the children asked for.
		wantTrue, wantFalse    []string
		wantPods, wantServices []string
		wantActive             map[ReplicaType]int32
	}{{
		name:         "a new job asks for every replica",
		spec:         psWorkers(RestartNever, nil),
		wantTrue:     []string{Created},
		wantPods:     []string{"j-ps-0", "j-worker-0", "j-worker-1"},
		wantServices: []string{"j-ps-0", "j-worker-0", "j-worker-1"},
	}, {
		name:         "running workers: Running",
		spec:         psWorkers(RestartNever, nil),
		pods:         running3,
		wantTrue:     []string{Created, Running},
		wantPods:     []string{"j-ps-0", "j-worker-0", "j-worker-1"},
		wantServices: []string{"j-ps-0", "j-worker-0", "j-worker-1"},
		wantActive:   map[ReplicaType]int32{PS: 1, Worker: 2},
	}, {
		name:       "AllWorkers: one worker done is not enough",
		spec:       psWorkers(RestartNever, map[string]any{"successPolicy": "AllWorkers"}),
		conditions: map[string]string{Created: "True", Running: "True"},
		pods:       with(map[string]podState{"j-worker-0": succeeded}),
		wantTrue:   []string{Created, Running}, wantFalse: []string{},
		wantPods:     []string{"j-ps-0", "j-worker-0", "j-worker-1"},
		wantServices: []string{"j-ps-0", "j-worker-0", "j-worker-1"},
		wantActive:   map[ReplicaType]int32{PS: 1, Worker: 1},
	}, {
		name:       "AllWorkers: every worker done succeeds; the running PS goes",
		spec:       psWorkers(RestartNever, map[string]any{"successPolicy": "AllWorkers"}),
		conditions: map[string]string{Created: "True", Running: "True"},
		pods:       with(map[string]podState{"j-worker-0": succeeded, "j-worker-1": succeeded}),
		wantTrue:   []string{Created, Succeeded}, wantFalse: []string{Running},
		wantPods:     []string{"j-worker-0", "j-worker-1"},
		wantServices: []string{"j-worker-0", "j-worker-1"},
		wantActive:   map[ReplicaType]int32{PS: 1},
	}, {
		name:       "by default worker 0 done succeeds",
		spec:       psWorkers(RestartNever, nil),
		conditions: map[string]string{Created: "True", Running: "True"},
		pods:       with(map[string]podState{"j-worker-0": succeeded}),
		wantTrue:   []string{Created, Succeeded}, wantFalse: []string{Running},
		wantPods:     []string{"j-worker-0"},
		wantServices: []string{"j-worker-0"},
		wantActive:   map[ReplicaType]int32{PS: 1, Worker: 1},
	}, {
		name: "with a Chief, the Chief decides",
		spec: map[string]any{"tfReplicaSpecs": replicaSpecs(map[ReplicaType]ReplicaSpec{
			Chief: {Replicas: n(1), RestartPolicy: RestartNever}, Worker: {Replicas: n(1), RestartPolicy: RestartNever},
		})},
		conditions: map[string]string{Created: "True", Running: "True"},
		pods:       map[string]podState{"j-chief-0": succeeded, "j-worker-0": {phase: corev1.PodRunning}},
		wantTrue:   []string{Created, Succeeded}, wantFalse: []string{Running},
		wantPods:     []string{"j-chief-0"},
		wantServices: []string{"j-chief-0"},
		wantActive:   map[ReplicaType]int32{Worker: 1},
	}, {
		name:       "ExitCode, killed by a signal: the Pod is restarted",
		spec:       psWorkers(RestartExitCode, nil),
		conditions: map[string]string{Created: "True", Running: "True"},
		pods:       with(map[string]podState{"j-worker-1": failed(137)}),
		wantTrue:   []string{Created, Restarting},
		wantPods:   []string{"j-ps-0", "j-worker-0"},
		// The Service stays: the Pod comes back under the same address.
		wantServices: []string{"j-ps-0", "j-worker-0", "j-worker-1"},
		wantActive:   map[ReplicaType]int32{PS: 1, Worker: 1},
	}, {
		name:       "ExitCode, a permanent error: the job fails, the running Pods go",
		spec:       psWorkers(RestartExitCode, nil),
		conditions: map[string]string{Created: "True", Running: "True"},
		pods:       with(map[string]podState{"j-worker-1": failed(1)}),
		wantTrue:   []string{Created, Failed}, wantFalse: []string{Running},
		wantPods:     []string{"j-worker-1"},
		wantServices: []string{"j-worker-1"},
		wantActive:   map[ReplicaType]int32{PS: 1, Worker: 1},
	}, {
		name:         "OnFailure restarts whatever the exit code",
		spec:         psWorkers(RestartOnFailure, nil),
		conditions:   map[string]string{Created: "True", Running: "True"},
		pods:         with(map[string]podState{"j-worker-0": failed(1)}),
		wantTrue:     []string{Created, Restarting},
		wantPods:     []string{"j-ps-0", "j-worker-1"},
		wantServices: []string{"j-ps-0", "j-worker-0", "j-worker-1"},
		wantActive:   map[ReplicaType]int32{PS: 1, Worker: 1},
	}, {
		name:       "Never fails the job",
		spec:       psWorkers(RestartNever, map[string]any{"runPolicy": map[string]any{"cleanPodPolicy": "None"}}),
		conditions: map[string]string{Created: "True", Running: "True"},
		pods:       with(map[string]podState{"j-worker-0": failed(137)}),
		wantTrue:   []string{Created, Failed}, wantFalse: []string{Running},
		wantPods:     []string{"j-ps-0", "j-worker-0", "j-worker-1"},
		wantServices: []string{"j-ps-0", "j-worker-0", "j-worker-1"},
		wantActive:   map[ReplicaType]int32{PS: 1, Worker: 1},
	}, {
		name:       "a finished job creates no Pod",
		spec:       psWorkers(RestartNever, map[string]any{"runPolicy": map[string]any{"cleanPodPolicy": "None"}}),
		conditions: map[string]string{Created: "True", Running: "False", Succeeded: "True"},
		pods:       map[string]podState{"j-worker-0": succeeded},
		wantTrue:   []string{Created, Succeeded}, wantFalse: []string{Running},
		wantPods:     []string{"j-worker-0"},
		wantServices: []string{"j-worker-0"},
	}, {
		name:       "a finished job restarts no Pod",
		spec:       psWorkers(RestartOnFailure, nil),
		conditions: map[string]string{Created: "True", Running: "False", Failed: "True"},
		pods:       with(map[string]podState{"j-worker-0": failed(1)}),
		wantTrue:   []string{Created, Failed}, wantFalse: []string{Running},
		wantPods:     []string{"j-worker-0"},
		wantServices: []string{"j-worker-0"},
		wantActive:   map[ReplicaType]int32{PS: 1, Worker: 1},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := Sync(t.Context(), request(t, tc.spec, tc.conditions, tc.pods))
			if err != nil {
				t.Fatal(err)
			}
			status, err := hook.Decode[TFJobStatus](resp.Status)
			if err != nil {
				t.Fatal(err)
			}
			byStatus := map[corev1.ConditionStatus][]string{}
			for _, c := range status.Conditions {
				byStatus[c.Status] = append(byStatus[c.Status], c.Type)
			}
			if !sameSet(byStatus[corev1.ConditionTrue], tc.wantTrue) || !sameSet(byStatus[corev1.ConditionFalse], tc.wantFalse) {
				t.Errorf("conditions True %v, False %v; want True %v, False %v", byStatus[corev1.ConditionTrue], byStatus[corev1.ConditionFalse], tc.wantTrue, tc.wantFalse)
			}
			if status.StartTime == nil || status.finished() != (status.CompletionTime != nil) {
				t.Errorf("startTime %v, completionTime %v", status.StartTime, status.CompletionTime)
			}
			for typ, count := range status.ReplicaStatuses {
				if count.Active != tc.wantActive[typ] {
					t.Errorf("replicaStatuses[%s].active = %d, want %d", typ, count.Active, tc.wantActive[typ])
				}
			}
			names := map[string][]string{}
			for _, c := range resp.Children {
				switch c := c.(type) {
				case *corev1.Pod:
					names["Pod"] = append(names["Pod"], c.Name)
				case *corev1.Service:
					names["Service"] = append(names["Service"], c.Name)
				default:
					t.Errorf("a child of type %T", c)
				}
			}
			if !sameSet(names["Pod"], tc.wantPods) || !sameSet(names["Service"], tc.wantServices) {
				t.Errorf("children: Pods %v, Services %v; want %v, %v", names["Pod"], names["Service"], tc.wantPods, tc.wantServices)
			}
		})
	}
}

func sameSet(a, b []string) bool {
	return slices.Equal(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b)))
}

// TestTFConfig: every Pod knows the whole cluster by Service address, and
// its own task; its Service selects it alone.
func TestTFConfig(t *testing.T) {
	resp, err := Sync(t.Context(), request(t, psWorkers(RestartExitCode, nil), nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range resp.Children {
		switch c := c.(type) {
		case *corev1.Pod:
			pod := c
			if pod.Spec.RestartPolicy != corev1.RestartPolicyNever {
				t.Errorf("%s: restartPolicy %s, want Never (ExitCode restarts are the hook's)", pod.Name, pod.Spec.RestartPolicy)
			}
			var config struct {
				Cluster map[string][]string
				Task    struct {
					Type  string
					Index int
				}
			}
			env := pod.Spec.Containers[0].Env
			if len(env) != 1 || env[0].Name != "TF_CONFIG" || json.Unmarshal([]byte(env[0].Value), &config) != nil {
				t.Fatalf("%s: env %v", pod.Name, env)
			}
			want := map[string][]string{"ps": {"j-ps-0.ns.svc:2222"}, "worker": {"j-worker-0.ns.svc:2222", "j-worker-1.ns.svc:2222"}}
			if !maps.EqualFunc(config.Cluster, want, slices.Equal) {
				t.Errorf("%s: TF_CONFIG cluster %v, want %v", pod.Name, config.Cluster, want)
			}
			if ReplicaName("j", ReplicaType(map[string]string{"ps": "PS", "worker": "Worker"}[config.Task.Type]), config.Task.Index) != pod.Name {
				t.Errorf("%s: TF_CONFIG task %+v", pod.Name, config.Task)
			}
		case *corev1.Service:
			svc := c
			if svc.Spec.ClusterIP != corev1.ClusterIPNone || svc.Spec.Selector[LabelReplicaIndex] == "" || svc.Spec.Ports[0].Port != DefaultPort {
				t.Errorf("%s: %+v", svc.Name, svc.Spec)
			}
		}
	}
}

func TestManifests(t *testing.T) {
	crd, uc := exampletest.Manifests(t, CRD, ControllerManifest)
	exampletest.DefinesGVR(t, crd, GVR)
	methods := exampletest.UpdateMethods(uc)
	if uc.Name != Controller || methods["pods"] != v1alpha1.ChildUpdateRecreate || methods["services"] != v1alpha1.ChildUpdateInPlace {
		t.Errorf("controller.yaml registers %s with %v", uc.Name, methods)
	}
}
