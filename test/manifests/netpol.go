package manifests

import (
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Peer is a Pod that connects to another: its namespace, the namespace's
// labels and its own.
type Peer struct {
	Namespace       string
	NamespaceLabels map[string]string
	Labels          map[string]string
}

// Target is a Pod connected to: its namespace, labels and named container
// ports.
type Target struct {
	Namespace string
	Labels    map[string]string
	Ports     map[string]int32
}

// Admits says whether the NetworkPolicies of the set let from connect to
// the TCP port of to, as the API defines them: a Pod that no policy
// selects for ingress takes every connection; one that some do takes only
// those a rule of one of them allows. (Connections from the Pod's own
// node, which are always allowed, and ipBlocks are not considered.)
func (s Set) Admits(t testing.TB, from Peer, to Target, port int32) bool {
	t.Helper()
	isolated := false
	for _, o := range s.OfKind("NetworkPolicy") {
		np, err := As[networkingv1.NetworkPolicy](o)
		if err != nil {
			t.Fatal(err)
		}
		if np.Namespace != to.Namespace || !selects(t, &np.Spec.PodSelector, to.Labels) || !forIngress(np) {
			continue
		}
		isolated = true
		for _, rule := range np.Spec.Ingress {
			if rulePorts(rule.Ports, to.Ports, port) && rulePeers(t, rule.From, np.Namespace, from) {
				return true
			}
		}
	}
	return !isolated
}

func forIngress(np *networkingv1.NetworkPolicy) bool {
	if len(np.Spec.PolicyTypes) == 0 {
		return true
	}
	for _, p := range np.Spec.PolicyTypes {
		if p == networkingv1.PolicyTypeIngress {
			return true
		}
	}
	return false
}

// rulePorts says whether a rule's ports hold the TCP port (named ports
// are the target's).
func rulePorts(ports []networkingv1.NetworkPolicyPort, named map[string]int32, port int32) bool {
	if len(ports) == 0 {
		return true
	}
	for _, p := range ports {
		if p.Protocol != nil && *p.Protocol != corev1.ProtocolTCP {
			continue
		}
		if p.Port == nil {
			return true
		}
		n := p.Port.IntVal
		if p.Port.StrVal != "" {
			var ok bool
			if n, ok = named[p.Port.StrVal]; !ok {
				continue
			}
		}
		if port == n || (p.EndPort != nil && port >= n && port <= *p.EndPort) {
			return true
		}
	}
	return false
}

// rulePeers says whether a rule's peers (of a policy in namespace) hold
// from.
func rulePeers(t testing.TB, peers []networkingv1.NetworkPolicyPeer, namespace string, from Peer) bool {
	if len(peers) == 0 {
		return true
	}
	for _, p := range peers {
		switch {
		case p.IPBlock != nil:
			continue
		case p.NamespaceSelector == nil && from.Namespace != namespace:
			continue
		case p.NamespaceSelector != nil && !selects(t, p.NamespaceSelector, from.NamespaceLabels):
			continue
		case p.PodSelector != nil && !selects(t, p.PodSelector, from.Labels):
			continue
		}
		return true
	}
	return false
}

func selects(t testing.TB, ls *metav1.LabelSelector, l map[string]string) bool {
	t.Helper()
	sel, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil {
		t.Fatal(err)
	}
	return sel.Matches(labels.Set(l))
}

// HookWorkerLabel labels the Pods of hook workers, which the NetworkPolicy
// of the NATS servers lets connect to the client port, "true".
const HookWorkerLabel = "universalcontroller.dev/hook-worker"

// CheckNATSNetworkPolicy checks who the NetworkPolicies of the set let
// connect to the Pods of a NATS StatefulSet of the set: to the route port
// its own Pods only; to the client port the Pods of uc's roles (roles:
// their labels, in the StatefulSet's namespace) and hook workers (Pods
// labelled HookWorkerLabel, in any namespace); no other Pod to either,
// nor a Pod labelled as a role's or a server's in another namespace.
func CheckNATSNetworkPolicy(t testing.TB, s Set, sts *appsv1.StatefulSet, roles []map[string]string) {
	t.Helper()
	ns := sts.Namespace
	pod := sts.Spec.Template
	to := Target{Namespace: ns, Labels: pod.Labels, Ports: map[string]int32{}}
	for _, p := range pod.Spec.Containers[0].Ports {
		to.Ports[p.Name] = p.ContainerPort
	}
	client, route := to.Ports["client"], to.Ports["cluster"]
	if client == 0 || route == 0 {
		t.Fatalf("StatefulSet %s: ports %v, want client and cluster", sts.Name, to.Ports)
	}
	in := func(namespace string, labels map[string]string) Peer {
		return Peer{Namespace: namespace, NamespaceLabels: map[string]string{"kubernetes.io/metadata.name": namespace}, Labels: labels}
	}
	type access struct {
		who   string
		from  Peer
		port  int32
		allow bool
	}
	accesses := []access{
		{"a NATS server", in(ns, pod.Labels), route, true},
		{"a hook worker in namespace hooks", in("hooks", map[string]string{HookWorkerLabel: "true", "app": "foo-hook"}), client, true},
		{"a hook worker in namespace hooks", in("hooks", map[string]string{HookWorkerLabel: "true", "app": "foo-hook"}), route, false},
		{"a hook worker in the servers' namespace", in(ns, map[string]string{HookWorkerLabel: "true"}), client, true},
		{"a Pod of the servers' namespace", in(ns, map[string]string{"app": "other"}), client, false},
		{"a Pod of the servers' namespace", in(ns, map[string]string{"app": "other"}), route, false},
		{"a Pod of another namespace", in("elsewhere", map[string]string{"app": "other"}), client, false},
		{"a Pod labelled as a NATS server in another namespace", in("elsewhere", pod.Labels), route, false},
		{"a Pod labelled hook-worker false", in("hooks", map[string]string{HookWorkerLabel: "false"}), client, false},
	}
	for i, labels := range roles {
		who := fmt.Sprintf("uc's role %d (%v)", i, labels)
		accesses = append(accesses,
			access{who, in(ns, labels), client, true},
			access{who, in(ns, labels), route, false},
			access{who + " in another namespace", in("elsewhere", labels), client, false},
		)
	}
	for _, a := range accesses {
		if got := s.Admits(t, a.from, to, a.port); got != a.allow {
			t.Errorf("%s may connect to port %d of the NATS servers: %t, want %t", a.who, a.port, got, a.allow)
		}
	}
}
