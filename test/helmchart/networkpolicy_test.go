package helmchart

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"

	"universalcontroller.dev/uc/test/manifests"
)

// rolePods are the labels of the Pods of the roles of a render, whose
// objects are prefixed with fullname.
func rolePods(t *testing.T, m manifests.Set, fullname string) []map[string]string {
	t.Helper()
	var out []map[string]string
	for _, role := range manifests.Roles {
		out = append(out, manifests.Typed[appsv1.Deployment](t, m, "Deployment", fullname+"-"+role).Spec.Template.Labels)
	}
	return out
}

// TestNetworkPolicy: by default, the chart's NetworkPolicy lets only its
// NATS servers reach their route port, and only its roles and hook
// workers their client port; not another release's roles in the same
// namespace.
func TestNetworkPolicy(t *testing.T) {
	m := render(t, release, nil)
	sts := manifests.Typed[appsv1.StatefulSet](t, m, "StatefulSet", "uc-nats")
	manifests.CheckNATSNetworkPolicy(t, m, sts, rolePods(t, m, "uc"))

	other := render(t, "payments", nil)
	for _, pod := range rolePods(t, other, "payments-uc") {
		from := manifests.Peer{Namespace: namespace, Labels: pod}
		if m.Admits(t, from, natsTarget(sts), 4222) {
			t.Errorf("release payments' Pods %v may connect to release uc's NATS", pod)
		}
	}
}

// natsTarget is a NATS server of the StatefulSet.
func natsTarget(sts *appsv1.StatefulSet) manifests.Target {
	to := manifests.Target{Namespace: sts.Namespace, Labels: sts.Spec.Template.Labels, Ports: map[string]int32{}}
	for _, p := range sts.Spec.Template.Spec.Containers[0].Ports {
		to.Ports[p.Name] = p.ContainerPort
	}
	return to
}

// TestNetworkPolicyValues: networkPolicy.enabled, .hookWorkerNamespaceSelector
// and .extraIngress.
func TestNetworkPolicyValues(t *testing.T) {
	hookWorker := map[string]string{manifests.HookWorkerLabel: "true"}
	for _, tc := range []convention{
		{"disabled", setValues(t, "networkPolicy.enabled=false"), func(t *testing.T, m manifests.Set) {
			if np := m.OfKind("NetworkPolicy"); len(np) != 0 {
				t.Errorf("networkPolicy.enabled=false, the chart makes %d NetworkPolicies", len(np))
			}
		}},
		{"external NATS", externalNATS, func(t *testing.T, m manifests.Set) {
			if np := m.OfKind("NetworkPolicy"); len(np) != 0 {
				t.Errorf("with an external NATS, the chart makes %d NetworkPolicies", len(np))
			}
		}},
		{"hookWorkerNamespaceSelector", setValues(t, "networkPolicy.hookWorkerNamespaceSelector.matchLabels.hooks=allowed"), func(t *testing.T, m manifests.Set) {
			to := natsTarget(manifests.Typed[appsv1.StatefulSet](t, m, "StatefulSet", "uc-nats"))
			for labels, want := range map[string]bool{"allowed": true, "": false} {
				from := manifests.Peer{Namespace: "hooks", NamespaceLabels: map[string]string{"hooks": labels}, Labels: hookWorker}
				if got := m.Admits(t, from, to, 4222); got != want {
					t.Errorf("a hook worker in a namespace labelled hooks=%q may connect: %t, want %t", labels, got, want)
				}
			}
		}},
		{"extraIngress", setJSONValues(t, nil, `networkPolicy.extraIngress=[{"from":[{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"monitoring"}}}],"ports":[{"port":"monitor"}]}]`), func(t *testing.T, m manifests.Set) {
			sts := manifests.Typed[appsv1.StatefulSet](t, m, "StatefulSet", "uc-nats")
			to := natsTarget(sts)
			monitoring := manifests.Peer{Namespace: "monitoring", NamespaceLabels: map[string]string{"kubernetes.io/metadata.name": "monitoring"}}
			if !m.Admits(t, monitoring, to, 8222) || m.Admits(t, monitoring, to, 4222) {
				t.Error("extraIngress does not let the namespace monitoring reach 8222, only")
			}
			manifests.CheckNATSNetworkPolicy(t, m, sts, rolePods(t, m, "uc"))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.check(t, render(t, release, tc.vals)) })
	}
}
