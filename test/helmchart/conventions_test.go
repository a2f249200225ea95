package helmchart

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/strvals"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"universalcontroller.dev/uc/test/manifests"
)

// setValues is the values of `helm install --set s…`.
func setValues(t *testing.T, sets ...string) map[string]any {
	t.Helper()
	vals := map[string]any{}
	for _, s := range sets {
		if err := strvals.ParseInto(s, vals); err != nil {
			t.Fatalf("--set %s: %v", s, err)
		}
	}
	return vals
}

// setJSONValues is the values of `helm install --set-json s…`, over
// vals if not nil.
func setJSONValues(t *testing.T, vals map[string]any, sets ...string) map[string]any {
	t.Helper()
	if vals == nil {
		vals = map[string]any{}
	}
	for _, s := range sets {
		if err := strvals.ParseJSON(s, vals); err != nil {
			t.Fatalf("--set-json %s: %v", s, err)
		}
	}
	return vals
}

// convention is a value the conventions of official charts (Metacontroller's,
// NATS', Knative's) call for, and what it must change in the render.
type convention struct {
	name  string
	vals  map[string]any
	check func(*testing.T, manifests.Set)
}

// TestConventions renders the chart with each value of the conventions and
// checks that it takes effect, and that the render still holds together
// (consistent).
func TestConventions(t *testing.T) {
	for _, tc := range conventions(t) {
		t.Run(tc.name, func(t *testing.T) {
			m := render(t, release, tc.vals)
			consistent(t, m)
			tc.check(t, m)
		})
	}
}

func conventions(t *testing.T) []convention {
	return []convention{
		{"nameOverride", setValues(t, "nameOverride=ctl", "metrics.podMonitor.enabled=true"), func(t *testing.T, m manifests.Set) {
			named(t, m, "uc-ctl-")
			for _, role := range manifests.Roles {
				d := manifests.Typed[appsv1.Deployment](t, m, "Deployment", "uc-ctl-"+role)
				if got := d.Spec.Template.Labels["app.kubernetes.io/name"]; got != "ctl" {
					t.Errorf("uc-ctl-%s's Pods are labelled app.kubernetes.io/name=%s, want ctl", role, got)
				}
			}
			selector, _, _ := unstructured.NestedStringMap(m.Find("PodMonitor", "uc-ctl").Object, "spec", "selector", "matchLabels")
			if selector["app.kubernetes.io/name"] != "ctl" {
				t.Errorf("the PodMonitor selects %v, not the renamed Pods", selector)
			}
		}},
		{"fullnameOverride", setValues(t, "fullnameOverride=payments"), func(t *testing.T, m manifests.Set) {
			named(t, m, "payments-")
			if got := manifests.Typed[corev1.ConfigMap](t, m, "ConfigMap", "payments-config").Data["UC_NATS_URL"]; got != "nats://payments-nats:4222" {
				t.Errorf("UC_NATS_URL=%s, want the renamed NATS", got)
			}
		}},
		{"namespaceOverride", setValues(t, "namespaceOverride=other"), func(t *testing.T, m manifests.Set) {
			for _, o := range m {
				if isNamespaced(o) && o.GetNamespace() != "other" {
					t.Errorf("%s %s is in namespace %q, want other", o.GetKind(), o.GetName(), o.GetNamespace())
				}
			}
			for _, s := range subjects(t, m) {
				if s.Namespace != "other" {
					t.Errorf("a binding names ServiceAccount %s/%s, want it in other", s.Namespace, s.Name)
				}
			}
		}},
		{"serviceAccount name and annotations", setValues(t, "serviceAccount.name=team-uc", "serviceAccount.annotations.iam\\.example\\.com/role=uc"), func(t *testing.T, m manifests.Set) {
			for _, role := range manifests.Roles {
				want := "team-uc-" + role
				if got := manifests.Typed[appsv1.Deployment](t, m, "Deployment", "uc-"+role).Spec.Template.Spec.ServiceAccountName; got != want {
					t.Errorf("uc-%s runs as %s, want %s", role, got, want)
				}
				if sa := manifests.Typed[corev1.ServiceAccount](t, m, "ServiceAccount", want); sa.Annotations["iam.example.com/role"] != "uc" {
					t.Errorf("ServiceAccount %s: annotations %v", want, sa.Annotations)
				}
			}
		}},
		{"serviceAccount.create false", setValues(t, "serviceAccount.create=false", "serviceAccount.name=mine"), func(t *testing.T, m manifests.Set) {
			if sas := m.OfKind("ServiceAccount"); len(sas) != 0 {
				t.Errorf("serviceAccount.create=false, the chart makes %d ServiceAccounts", len(sas))
			}
			for _, s := range subjects(t, m) {
				if !strings.HasPrefix(s.Name, "mine-") {
					t.Errorf("a binding names ServiceAccount %s, not one of the user's (mine-<role>)", s.Name)
				}
			}
		}},
		{"rbac.create false", setValues(t, "rbac.create=false", "metacontrollerAPI=true"), func(t *testing.T, m manifests.Set) {
			for _, kind := range []string{"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"} {
				if got := m.OfKind(kind); len(got) != 0 {
					t.Errorf("rbac.create=false, the chart makes %d %ss", len(got), kind)
				}
			}
			if len(m.OfKind("ServiceAccount")) != 3 {
				t.Error("rbac.create=false removed the ServiceAccounts")
			}
		}},
		{"pod annotations and labels", setJSONValues(t, setValues(t,
			"podAnnotations.team=payments", "podLabels.team=payments",
			"applier.podAnnotations.applier-note=yes", "applier.podLabels.tier=apply",
			"nats.server.podLabels.tier=bus",
			// A label of the selector is not theirs to change.
			"podLabels.app\\.kubernetes\\.io/component=other",
		), `watcher.podAnnotations={"prometheus.io/scrape":"false"}`), func(t *testing.T, m manifests.Set) {
			for name, tmpl := range podTemplates(t, m) {
				if tmpl.Annotations["team"] != "payments" || tmpl.Labels["team"] != "payments" {
					t.Errorf("%s: Pod annotations %v, labels %v; want team=payments in both", name, tmpl.Annotations, tmpl.Labels)
				}
				if tmpl.Annotations["checksum/config"] == "" {
					t.Errorf("%s: the Pods lost the annotation checksum/config", name)
				}
				if want := map[string]string{"uc-applier": "apply", "uc-nats": "bus"}[name]; tmpl.Labels["tier"] != want {
					t.Errorf("%s: Pod label tier=%q, want %q", name, tmpl.Labels["tier"], want)
				}
				if (tmpl.Annotations["applier-note"] == "yes") != (name == "uc-applier") {
					t.Errorf("%s: Pod annotations %v; the applier's own are the applier's only", name, tmpl.Annotations)
				}
			}
			if got := podTemplates(t, m)["uc-watcher"].Annotations["prometheus.io/scrape"]; got != "false" {
				t.Errorf("the watcher's podAnnotations do not override prometheus.io/scrape: %q", got)
			}
		}},
		{"security contexts", setValues(t,
			"podSecurityContext.runAsUser=1001", "podSecurityContext.fsGroup=1001", "securityContext.readOnlyRootFilesystem=false",
			"nats.server.podSecurityContext.runAsUser=2000", "nats.server.securityContext.runAsNonRoot=true",
		), func(t *testing.T, m manifests.Set) {
			for name, tmpl := range podTemplates(t, m) {
				pod, c := tmpl.Spec.SecurityContext, tmpl.Spec.Containers[0].SecurityContext
				if pod == nil || c == nil {
					t.Fatalf("%s: Pod security context %v, container's %v", name, pod, c)
				}
				// What is not overridden stays strict.
				if !*pod.RunAsNonRoot || pod.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault || *c.AllowPrivilegeEscalation || !slices.Equal(c.Capabilities.Drop, []corev1.Capability{"ALL"}) {
					t.Errorf("%s: Pod security context %v, container's %v; the defaults not overridden are lost", name, pod, c)
				}
				if name == "uc-nats" {
					if *pod.RunAsUser != 2000 || *pod.FSGroup != 1000 || !*c.ReadOnlyRootFilesystem || c.RunAsNonRoot == nil || !*c.RunAsNonRoot {
						t.Errorf("%s: Pod security context %v, container's %v; want nats.server's", name, pod, c)
					}
					continue
				}
				if *pod.RunAsUser != 1001 || *pod.FSGroup != 1001 || *c.ReadOnlyRootFilesystem {
					t.Errorf("%s: Pod security context %v, container's %v; want the values'", name, pod, c)
				}
			}
		}},
		{"priorityClassName", setValues(t, "priorityClassName=uc-high", "applier.priorityClassName=uc-apply", "nats.server.priorityClassName=uc-bus"), func(t *testing.T, m manifests.Set) {
			want := map[string]string{"uc-watcher": "uc-high", "uc-dispatcher": "uc-high", "uc-applier": "uc-apply", "uc-nats": "uc-bus"}
			for name, tmpl := range podTemplates(t, m) {
				if tmpl.Spec.PriorityClassName != want[name] {
					t.Errorf("%s: priorityClassName %q, want %q", name, tmpl.Spec.PriorityClassName, want[name])
				}
			}
		}},
		{"extraArgs and extraEnv", setJSONValues(t,
			setValues(t, "watcher.extraArgs={--log-level=debug}", "nats.server.extraArgs={--debug}"),
			`applier.extraEnv=[{"name":"UC_LOG_LEVEL","value":"debug"},{"name":"TOKEN","valueFrom":{"secretKeyRef":{"name":"t","key":"k"}}}]`,
			`nats.server.extraEnv=[{"name":"GOGC","value":"50"}]`,
		), func(t *testing.T, m manifests.Set) {
			tmpls := podTemplates(t, m)
			if args := tmpls["uc-watcher"].Spec.Containers[0].Args; !slices.Equal(args, []string{"watcher", "--log-level=debug"}) {
				t.Errorf("uc-watcher args %q, want watcher and the extra one", args)
			}
			if args := tmpls["uc-nats"].Spec.Containers[0].Args; args[len(args)-1] != "--debug" {
				t.Errorf("NATS args %q, want --debug last", args)
			}
			applier := envOf(tmpls["uc-applier"].Spec.Containers[0])
			if applier["UC_LOG_LEVEL"] != "debug" || !strings.Contains(applier["TOKEN"], "t") || applier["UC_NATS_USER"] != "uc-applier" {
				t.Errorf("uc-applier env %v; want the extra variables with the chart's", applier)
			}
			if env := envOf(tmpls["uc-nats"].Spec.Containers[0]); env["GOGC"] != "50" {
				t.Errorf("NATS env %v, want GOGC=50", env)
			}
			if _, ok := envOf(tmpls["uc-dispatcher"].Spec.Containers[0])["UC_LOG_LEVEL"]; ok {
				t.Error("the applier's extraEnv reached the dispatcher")
			}
		}},
		{"resources", setValues(t, "dispatcher.resources.limits.memory=512Mi", "nats.server.resources.requests.cpu=1"), func(t *testing.T, m manifests.Set) {
			tmpls := podTemplates(t, m)
			if got := tmpls["uc-dispatcher"].Spec.Containers[0].Resources.Limits.Memory().String(); got != "512Mi" {
				t.Errorf("uc-dispatcher memory limit %s, want 512Mi", got)
			}
			if got := tmpls["uc-nats"].Spec.Containers[0].Resources.Requests.Cpu().String(); got != "1" {
				t.Errorf("NATS cpu request %s, want 1", got)
			}
		}},
		{"scheduling per role", setJSONValues(t,
			setValues(t, "nodeSelector.pool=system", "applier.nodeSelector.pool=apply", "nats.server.nodeSelector.pool=storage"),
			`tolerations=[{"key":"all","operator":"Exists"}]`,
			`watcher.tolerations=[{"key":"watch","operator":"Exists"}]`,
			`dispatcher.affinity={"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"d","operator":"Exists"}]}]}}}`,
		), func(t *testing.T, m manifests.Set) {
			tmpls := podTemplates(t, m)
			for name, pool := range map[string]string{"uc-watcher": "system", "uc-dispatcher": "system", "uc-applier": "apply", "uc-nats": "storage"} {
				if got := tmpls[name].Spec.NodeSelector["pool"]; got != pool {
					t.Errorf("%s: nodeSelector pool=%q, want %q", name, got, pool)
				}
			}
			for name, key := range map[string]string{"uc-watcher": "watch", "uc-dispatcher": "all", "uc-applier": "all", "uc-nats": "all"} {
				if tol := tmpls[name].Spec.Tolerations; len(tol) != 1 || tol[0].Key != key {
					t.Errorf("%s: tolerations %v, want only %s's", name, tol, key)
				}
			}
			for name, tmpl := range tmpls {
				if (tmpl.Spec.Affinity != nil) != (name == "uc-dispatcher") {
					t.Errorf("%s: affinity %v; the dispatcher's is its own", name, tmpl.Spec.Affinity)
				}
			}
		}},
		{"topologySpreadConstraints", setJSONValues(t, nil,
			`applier.topologySpreadConstraints=[{"maxSkew":1,"topologyKey":"topology.kubernetes.io/zone","whenUnsatisfiable":"DoNotSchedule"}]`,
			`nats.server.topologySpreadConstraints=[{"maxSkew":1,"topologyKey":"topology.kubernetes.io/zone","whenUnsatisfiable":"DoNotSchedule","labelSelector":{"matchLabels":{"pick":"me"}}}]`,
		), func(t *testing.T, m manifests.Set) {
			tmpls := podTemplates(t, m)
			applier := tmpls["uc-applier"].Spec.TopologySpreadConstraints
			if len(applier) != 1 || applier[0].TopologyKey != "topology.kubernetes.io/zone" || !matches(applier[0].LabelSelector.MatchLabels, tmpls["uc-applier"].Labels) {
				t.Errorf("uc-applier spread %v; want the zones', selecting its own Pods", applier)
			}
			if nats := tmpls["uc-nats"].Spec.TopologySpreadConstraints; len(nats) != 1 || nats[0].LabelSelector.MatchLabels["pick"] != "me" {
				t.Errorf("NATS spread %v; want the values', with their labelSelector", nats)
			}
			if w := tmpls["uc-watcher"].Spec.TopologySpreadConstraints; len(w) != 1 || w[0].TopologyKey != "kubernetes.io/hostname" {
				t.Errorf("uc-watcher spread %v; want the default, over the nodes", w)
			}
		}},
		{"podDisruptionBudget", setValues(t,
			"applier.podDisruptionBudget.minAvailable=2",
			"watcher.podDisruptionBudget.enabled=false",
			"dispatcher.replicas=2", "dispatcher.podDisruptionBudget.enabled=true",
			"nats.server.podDisruptionBudget.maxUnavailable=40%",
		), func(t *testing.T, m manifests.Set) {
			budgets := pdbs(t, m)
			for name, want := range map[string]string{"uc-applier": "minAvailable 2", "uc-dispatcher": "maxUnavailable 1", "uc-nats": "maxUnavailable 40%"} {
				if budgets[name] != want {
					t.Errorf("PodDisruptionBudget %s: %q, want %q", name, budgets[name], want)
				}
			}
			if _, ok := budgets["uc-watcher"]; ok {
				t.Error("watcher.podDisruptionBudget.enabled=false, the chart makes one")
			}
		}},
		{"no PodDisruptionBudget for one replica", setValues(t, "watcher.replicas=1", "applier.replicas=1", "nats.server.replicas=1", "nats.streamReplicas=1"), func(t *testing.T, m manifests.Set) {
			if budgets := pdbs(t, m); len(budgets) != 0 {
				t.Errorf("one replica each, PodDisruptionBudgets %v would block every drain", budgets)
			}
		}},
	}
}

// TestDefaultPodDisruptionBudgets: by default, a majority of the NATS
// servers, all appliers but one and one watcher stay up through voluntary
// disruptions; the single dispatcher has no budget (it would block
// drains).
func TestDefaultPodDisruptionBudgets(t *testing.T) {
	want := map[string]string{"uc-nats": "maxUnavailable 1", "uc-applier": "maxUnavailable 1", "uc-watcher": "minAvailable 1"}
	if got := pdbs(t, render(t, release, nil)); !maps.Equal(got, want) {
		t.Errorf("PodDisruptionBudgets %v, want %v", got, want)
	}
	if got := pdbs(t, render(t, release, setValues(t, "nats.server.replicas=5")))["uc-nats"]; got != "maxUnavailable 2" {
		t.Errorf("5 NATS servers: %s, want maxUnavailable 2 (3 up)", got)
	}
}

// pdbs are the PodDisruptionBudgets of the render by name: "minAvailable
// N" or "maxUnavailable N".
func pdbs(t *testing.T, m manifests.Set) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, o := range m.OfKind("PodDisruptionBudget") {
		spec := manifests.Typed[policyv1.PodDisruptionBudget](t, manifests.Set{o}, o.GetKind(), o.GetName()).Spec
		switch {
		case spec.MinAvailable != nil && spec.MaxUnavailable != nil:
			out[o.GetName()] = "both"
		case spec.MinAvailable != nil:
			out[o.GetName()] = "minAvailable " + spec.MinAvailable.String()
		case spec.MaxUnavailable != nil:
			out[o.GetName()] = "maxUnavailable " + spec.MaxUnavailable.String()
		default:
			out[o.GetName()] = "neither"
		}
	}
	return out
}

// podTemplates are the Pod templates of the render's Deployments and
// StatefulSets, by name.
func podTemplates(t *testing.T, m manifests.Set) map[string]corev1.PodTemplateSpec {
	t.Helper()
	out := map[string]corev1.PodTemplateSpec{}
	for _, o := range m {
		switch o.GetKind() {
		case "Deployment":
			out[o.GetName()] = manifests.Typed[appsv1.Deployment](t, manifests.Set{o}, o.GetKind(), o.GetName()).Spec.Template
		case "StatefulSet":
			out[o.GetName()] = manifests.Typed[appsv1.StatefulSet](t, manifests.Set{o}, o.GetKind(), o.GetName()).Spec.Template
		}
	}
	return out
}

// named checks that every object but the CRDs is named with prefix (or
// is the prefix, without its "-").
func named(t *testing.T, m manifests.Set, prefix string) {
	t.Helper()
	for _, o := range m {
		if o.GetKind() != "CustomResourceDefinition" && !strings.HasPrefix(o.GetName(), prefix) && o.GetName() != strings.TrimSuffix(prefix, "-") {
			t.Errorf("%s %s is not named %s…", o.GetKind(), o.GetName(), prefix)
		}
	}
}

// isNamespaced says whether the chart's object of that kind is namespaced.
func isNamespaced(o *unstructured.Unstructured) bool {
	switch o.GetKind() {
	case "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding":
		return false
	}
	return true
}

// subjects are the ServiceAccounts the chart's bindings name.
func subjects(t *testing.T, m manifests.Set) []rbacv1.Subject {
	t.Helper()
	var out []rbacv1.Subject
	for _, o := range m {
		switch o.GetKind() {
		case "ClusterRoleBinding":
			out = append(out, manifests.Typed[rbacv1.ClusterRoleBinding](t, manifests.Set{o}, o.GetKind(), o.GetName()).Subjects...)
		case "RoleBinding":
			out = append(out, manifests.Typed[rbacv1.RoleBinding](t, manifests.Set{o}, o.GetKind(), o.GetName()).Subjects...)
		}
	}
	return out
}

// consistent checks what holds whatever the values: workloads select their
// own Pods, PodDisruptionBudgets select a workload's Pods, the Pods run as
// ServiceAccounts the chart makes (when it makes them), and bindings name
// them or the ServiceAccounts the chart makes.
func consistent(t *testing.T, m manifests.Set) {
	t.Helper()
	var pods []map[string]string
	var accounts []string
	for _, o := range m {
		var selector, labels map[string]string
		var sa string
		switch o.GetKind() {
		case "Deployment":
			d := manifests.Typed[appsv1.Deployment](t, manifests.Set{o}, o.GetKind(), o.GetName())
			selector, labels, sa = d.Spec.Selector.MatchLabels, d.Spec.Template.Labels, d.Spec.Template.Spec.ServiceAccountName
		case "StatefulSet":
			s := manifests.Typed[appsv1.StatefulSet](t, manifests.Set{o}, o.GetKind(), o.GetName())
			selector, labels = s.Spec.Selector.MatchLabels, s.Spec.Template.Labels
		default:
			continue
		}
		if !matches(selector, labels) {
			t.Errorf("%s %s selects %v, its Pods are labelled %v", o.GetKind(), o.GetName(), selector, labels)
		}
		pods = append(pods, labels)
		if sa != "" {
			accounts = append(accounts, sa)
		}
	}
	for _, o := range m.OfKind("PodDisruptionBudget") {
		pdb := manifests.Typed[policyv1.PodDisruptionBudget](t, manifests.Set{o}, o.GetKind(), o.GetName())
		if !slices.ContainsFunc(pods, func(l map[string]string) bool { return matches(pdb.Spec.Selector.MatchLabels, l) }) {
			t.Errorf("PodDisruptionBudget %s selects no Pods of the chart (%v)", pdb.Name, pdb.Spec.Selector.MatchLabels)
		}
	}
	if len(m.OfKind("ServiceAccount")) > 0 {
		for _, sa := range accounts {
			if m.Find("ServiceAccount", sa) == nil {
				t.Errorf("Pods run as ServiceAccount %s, which the chart does not make", sa)
			}
		}
	}
	for _, s := range subjects(t, m) {
		// The PodMonitor's ServiceAccount is no Pod's: Prometheus scrapes
		// with its token.
		if !slices.Contains(accounts, s.Name) && m.Find("ServiceAccount", s.Name) == nil {
			t.Errorf("a binding names ServiceAccount %s, which no Pod runs as and the chart does not make", s.Name)
		}
	}
}
