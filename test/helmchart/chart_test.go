package helmchart

import (
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"universalcontroller.dev/uc/internal/natsauth"
	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/test/manifests"
)

// allOptions turns every optional setting of the chart on.
var allOptions = map[string]any{
	"controllerSelector": "team=payments",
	"metacontrollerAPI":  true,
	"otlp":               map[string]any{"endpoint": "http://otel-collector.observability:4318"},
	"imagePullSecrets":   []any{map[string]any{"name": "registry"}},
	"nodeSelector":       map[string]any{"kubernetes.io/os": "linux"},
	"tolerations":        []any{map[string]any{"key": "uc", "operator": "Exists", "effect": "NoSchedule"}},
	"watcher":            map[string]any{"leaseName": "payments-watcher"},
	"dispatcher": map[string]any{"replicas": 2,
		"podDisruptionBudget": map[string]any{"enabled": true}},
	"applier": map[string]any{
		"extraArgs":                 []any{"--log-level=debug"},
		"extraEnv":                  []any{map[string]any{"name": "GOGC", "value": "50"}},
		"topologySpreadConstraints": []any{map[string]any{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway"}},
		"podDisruptionBudget":       map[string]any{"maxUnavailable": "34%"},
	},
	"nats": map[string]any{
		"auth": map[string]any{"extraUsers": []any{"hook-foo-controller"}},
		"tls":  map[string]any{"secretName": "nats-client-tls", "clientCert": true},
		"server": map[string]any{
			"routeAuth":          map[string]any{"password": "S3cretRoutes"},
			"priorityClassName":  "uc-bus",
			"podSecurityContext": map[string]any{"runAsUser": 1001},
			"extraEnv":           []any{map[string]any{"name": "GOGC", "value": "50"}},
		},
	},
	"metrics":            map[string]any{"podMonitor": map[string]any{"enabled": true, "labels": map[string]any{"release": "prometheus"}}},
	"podAnnotations":     map[string]any{"team": "payments"},
	"podLabels":          map[string]any{"team": "payments"},
	"priorityClassName":  "uc-high",
	"serviceAccount":     map[string]any{"annotations": map[string]any{"iam.example.com/role": "uc"}},
	"podSecurityContext": map[string]any{"fsGroup": 65532},
	"networkPolicy": map[string]any{
		"hookWorkerNamespaceSelector": map[string]any{"matchLabels": map[string]any{"hooks": "allowed"}},
		"extraIngress": []any{map[string]any{
			"from":  []any{map[string]any{"namespaceSelector": map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": "monitoring"}}}},
			"ports": []any{map[string]any{"port": 8222}},
		}},
	},
}

// externalNATS is an installation on a NATS of the user's, with the
// user's Secret of passwords.
var externalNATS = map[string]any{
	"nats": map[string]any{
		"url":            "nats://nats-0.nats.nats:4222,nats://nats-1.nats.nats:4222",
		"streamReplicas": 1,
		"auth":           map[string]any{"existingSecret": "my-nats-passwords"},
	},
}

// valueSets are the values TestLint and TestServerDryRun try.
var valueSets = []struct {
	name string
	vals map[string]any
}{{"defaults", nil}, {"all options", allOptions}, {"external NATS", externalNATS}}

// TestLint runs Helm's linter (`helm lint --strict`) on the chart with its
// defaults and with the values the other tests use: no warning, no error.
func TestLint(t *testing.T) {
	for _, vs := range valueSets {
		t.Run(vs.name, func(t *testing.T) {
			l := lint.All(chartDir, vs.vals, namespace, false)
			for _, m := range l.Messages {
				if m.Severity >= support.WarningSev {
					t.Error(m)
				} else {
					t.Log(m)
				}
			}
		})
	}
}

// TestValues renders the chart with each setting and checks what it
// changes.
func TestValues(t *testing.T) {
	for _, tc := range []struct {
		name  string
		vals  map[string]any
		check func(*testing.T, manifests.Set)
	}{
		{"external NATS", externalNATS, func(t *testing.T, m manifests.Set) {
			for _, kind := range []string{"StatefulSet", "Service", "PodDisruptionBudget"} {
				for _, o := range m.OfKind(kind) {
					if strings.Contains(o.GetName(), "nats") {
						t.Errorf("with an external NATS, the chart makes %s %s", kind, o.GetName())
					}
				}
			}
			if m.Find("ConfigMap", "uc-nats-config") != nil || len(m.OfKind("Secret")) != 0 {
				t.Error("with an external NATS and a Secret of the user's, the chart makes NATS configuration or a Secret")
			}
			config := manifests.Typed[corev1.ConfigMap](t, m, "ConfigMap", "uc-config").Data
			if config["UC_NATS_URL"] != "nats://nats-0.nats.nats:4222,nats://nats-1.nats.nats:4222" || config["UC_STREAM_REPLICAS"] != "1" {
				t.Errorf("uc-config: %v; want the external URL and 1 stream replica", config)
			}
			for _, role := range manifests.Roles {
				name, key := passwordSource(t, m, "uc-"+role)
				if want := natsauth.PasswordVariable(natsauth.RoleUser(role)); name != "my-nats-passwords" || key != want {
					t.Errorf("uc-%s takes its password from %s/%s; want my-nats-passwords/%s", role, name, key, want)
				}
			}
		}},
		{"all options", allOptions, func(t *testing.T, m manifests.Set) {
			config := manifests.Typed[corev1.ConfigMap](t, m, "ConfigMap", "uc-config").Data
			for k, v := range map[string]string{
				"UC_CONTROLLER_SELECTOR":      "team=payments",
				"UC_METACONTROLLER_API":       "true",
				"OTEL_EXPORTER_OTLP_ENDPOINT": "http://otel-collector.observability:4318",
			} {
				if config[k] != v {
					t.Errorf("uc-config %s=%q, want %q", k, config[k], v)
				}
			}
			for _, role := range manifests.Roles {
				cr := manifests.Typed[rbacv1.ClusterRole](t, m, "ClusterRole", "uc-"+role+"-metacontroller-api")
				if cr.Labels["universalcontroller.dev/aggregate-to-"+role] != "true" || !slices.Equal(cr.Rules[0].Resources, []string{"compositecontrollers", "decoratorcontrollers"}) {
					t.Errorf("ClusterRole %s: labels %v, rules %v; want Metacontroller's objects aggregated into uc-%s", cr.Name, cr.Labels, cr.Rules, role)
				}
				pod := manifests.Typed[appsv1.Deployment](t, m, "Deployment", "uc-"+role).Spec.Template.Spec
				if pod.ImagePullSecrets[0].Name != "registry" || pod.NodeSelector["kubernetes.io/os"] != "linux" || pod.Tolerations[0].Key != "uc" {
					t.Errorf("uc-%s: pull secrets %v, node selector %v, tolerations %v; want the values'", role, pod.ImagePullSecrets, pod.NodeSelector, pod.Tolerations)
				}
			}
			lease := manifests.Typed[rbacv1.Role](t, m, "Role", "uc-watcher-leader-election").Rules[1].ResourceNames
			if env := envOf(container(t, m, "uc-watcher")); env["UC_LEADER_ELECT_NAME"] != "payments-watcher" || !slices.Equal(lease, []string{"payments-watcher"}) {
				t.Errorf("the watcher elects with Lease %q, its Role allows %q; want payments-watcher", env["UC_LEADER_ELECT_NAME"], lease)
			}
			if d := manifests.Typed[appsv1.Deployment](t, m, "Deployment", "uc-dispatcher"); *d.Spec.Replicas != 2 || len(d.Spec.Template.Spec.TopologySpreadConstraints) != 1 {
				t.Errorf("uc-dispatcher: %d replicas, spread %v; want 2, over the nodes", *d.Spec.Replicas, d.Spec.Template.Spec.TopologySpreadConstraints)
			}
			secret := manifests.Typed[corev1.Secret](t, m, "Secret", "uc-nats-passwords")
			if _, ok := secret.Data[natsauth.PasswordVariable("hook-foo-controller")]; !ok {
				t.Errorf("the NATS passwords lack the extra user's: %v", slices.Sorted(maps.Keys(secret.Data)))
			}
			for _, role := range manifests.Roles {
				c := container(t, m, "uc-"+role)
				env := envOf(c)
				mounted := map[string]bool{}
				for _, vm := range c.VolumeMounts {
					for _, file := range []string{"ca.crt", "tls.crt", "tls.key"} {
						mounted[filepath.Join(vm.MountPath, file)] = vm.Name == "nats-tls"
					}
				}
				for _, v := range []string{"UC_NATS_TLS_CA", "UC_NATS_TLS_CERT", "UC_NATS_TLS_KEY"} {
					if !mounted[env[v]] {
						t.Errorf("uc-%s: %s=%q, not a file of the mounted Secret", role, v, env[v])
					}
				}
			}
		}},
		{"replicas", map[string]any{
			"watcher": map[string]any{"replicas": 3}, "dispatcher": map[string]any{"replicas": 2}, "applier": map[string]any{"replicas": 5},
			"nats": map[string]any{"server": map[string]any{"replicas": 5}},
		}, func(t *testing.T, m manifests.Set) {
			for role, want := range map[string]int32{"watcher": 3, "dispatcher": 2, "applier": 5} {
				if got := *manifests.Typed[appsv1.Deployment](t, m, "Deployment", "uc-"+role).Spec.Replicas; got != want {
					t.Errorf("uc-%s: %d replicas, want %d", role, got, want)
				}
			}
			sts := manifests.Typed[appsv1.StatefulSet](t, m, "StatefulSet", "uc-nats")
			pdb := manifests.Typed[policyv1.PodDisruptionBudget](t, m, "PodDisruptionBudget", "uc-nats")
			if *sts.Spec.Replicas != 5 || pdb.Spec.MaxUnavailable.IntValue() != 2 {
				t.Errorf("NATS: %d servers, %v may be down; want 5, 2 (a majority up)", *sts.Spec.Replicas, pdb.Spec.MaxUnavailable)
			}
			manifests.CheckRoutes(t, natsConfOf(t, m), sts)
		}},
		{"no metrics", map[string]any{"metrics": map[string]any{"enabled": false, "podMonitor": map[string]any{"enabled": true}}}, func(t *testing.T, m manifests.Set) {
			if pm := m.OfKind("PodMonitor"); len(pm) != 0 {
				t.Errorf("a PodMonitor without metrics: %v", pm)
			}
			for _, role := range manifests.Roles {
				d := manifests.Typed[appsv1.Deployment](t, m, "Deployment", "uc-"+role)
				c := d.Spec.Template.Spec.Containers[0]
				if addr, ok := envOf(c)["UC_METRICS_ADDR"]; !ok || addr != "" || len(c.Ports) != 1 || d.Spec.Template.Annotations["prometheus.io/scrape"] != "" {
					t.Errorf("uc-%s without metrics: env %v, ports %v, annotations %v", role, c.Env, c.Ports, d.Spec.Template.Annotations)
				}
			}
		}},
		{"pod monitor", map[string]any{"metrics": map[string]any{"port": 9090, "podMonitor": map[string]any{
			"enabled": true, "labels": map[string]any{"release": "prometheus"}, "interval": "15s"}}}, func(t *testing.T, m manifests.Set) {
			pm := m.Find("PodMonitor", "uc")
			if pm == nil {
				t.Fatal("no PodMonitor uc")
			}
			if pm.GetLabels()["release"] != "prometheus" {
				t.Errorf("PodMonitor labels %v, want release=prometheus among them", pm.GetLabels())
			}
			selector, _, _ := unstructured.NestedStringMap(pm.Object, "spec", "selector", "matchLabels")
			endpoints, _, _ := unstructured.NestedSlice(pm.Object, "spec", "podMetricsEndpoints")
			if len(endpoints) != 1 || endpoints[0].(map[string]any)["port"] != "metrics" || endpoints[0].(map[string]any)["interval"] != "15s" {
				t.Errorf("PodMetricsEndpoints %v, want the port metrics every 15s", endpoints)
			}
			for _, d := range m.OfKind("Deployment") {
				pod := manifests.Typed[appsv1.Deployment](t, m, "Deployment", d.GetName()).Spec.Template
				if !matches(selector, pod.Labels) {
					t.Errorf("the PodMonitor (%v) does not select the Pods of %s (%v)", selector, d.GetName(), pod.Labels)
				}
				ports := pod.Spec.Containers[0].Ports
				if !slices.ContainsFunc(ports, func(p corev1.ContainerPort) bool { return p.Name == "metrics" && p.ContainerPort == 9090 }) {
					t.Errorf("%s has no port metrics on 9090: %v", d.GetName(), ports)
				}
			}
			if matches(selector, manifests.Typed[appsv1.StatefulSet](t, m, "StatefulSet", "uc-nats").Spec.Template.Labels) {
				t.Errorf("the PodMonitor selects the NATS servers, which serve no /metrics")
			}
			if def := render(t, release, nil).OfKind("PodMonitor"); len(def) != 0 {
				t.Errorf("a PodMonitor by default: %v", def)
			}
			if sc := manifests.CheckPodMonitorAuth(t, m, pm, "uc-metrics-reader"); sc.ServiceAccount != "uc-metrics" {
				t.Errorf("the PodMonitor scrapes as %q, want the ServiceAccount uc-metrics", sc.ServiceAccount)
			}
		}},
		{"secure metrics by default", nil, func(t *testing.T, m manifests.Set) {
			manifests.CheckSecureMetrics(t, m, "uc")
			for _, role := range manifests.Roles {
				if dir, ok := envOf(container(t, m, "uc-"+role))["UC_METRICS_CERT_DIR"]; ok {
					t.Errorf("uc-%s: UC_METRICS_CERT_DIR=%s by default; want a self-signed certificate", role, dir)
				}
			}
		}},
		{"metrics certificate", map[string]any{"metrics": map[string]any{"certSecret": "uc-metrics-tls", "podMonitor": map[string]any{
			"enabled": true, "tlsConfig": map[string]any{"ca": map[string]any{"secret": map[string]any{"name": "uc-metrics-tls", "key": "ca.crt"}}, "serverName": "uc-metrics"}}}},
			func(t *testing.T, m manifests.Set) {
				for _, role := range manifests.Roles {
					d := manifests.Typed[appsv1.Deployment](t, m, "Deployment", "uc-"+role)
					c := d.Spec.Template.Spec.Containers[0]
					dir := envOf(c)["UC_METRICS_CERT_DIR"]
					mounted := slices.ContainsFunc(c.VolumeMounts, func(vm corev1.VolumeMount) bool { return vm.MountPath == dir && vm.Name == "metrics-tls" })
					fromSecret := slices.ContainsFunc(d.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool {
						return v.Name == "metrics-tls" && v.Secret != nil && v.Secret.SecretName == "uc-metrics-tls"
					})
					if dir == "" || !mounted || !fromSecret {
						t.Errorf("uc-%s: UC_METRICS_CERT_DIR=%q, mounts %v, volumes %v; want the Secret uc-metrics-tls mounted there", role, dir, c.VolumeMounts, d.Spec.Template.Spec.Volumes)
					}
				}
				endpoints, _, _ := unstructured.NestedSlice(m.Find("PodMonitor", "uc").Object, "spec", "podMetricsEndpoints")
				if tls := endpoints[0].(map[string]any)["tlsConfig"].(map[string]any); tls["serverName"] != "uc-metrics" || tls["insecureSkipVerify"] != nil {
					t.Errorf("the PodMonitor's tlsConfig %v; want the values' (its CA), and no insecureSkipVerify", tls)
				}
			}},
		{"plain metrics", map[string]any{"metrics": map[string]any{"secure": false, "podMonitor": map[string]any{"enabled": true}}}, func(t *testing.T, m manifests.Set) {
			for _, role := range manifests.Roles {
				d := manifests.Typed[appsv1.Deployment](t, m, "Deployment", "uc-"+role)
				if env := envOf(d.Spec.Template.Spec.Containers[0]); env["UC_METRICS_SECURE"] != "" || d.Spec.Template.Annotations["prometheus.io/scheme"] != "http" {
					t.Errorf("uc-%s with plain metrics: UC_METRICS_SECURE=%q, prometheus.io/scheme %q", role, env["UC_METRICS_SECURE"], d.Spec.Template.Annotations["prometheus.io/scheme"])
				}
			}
			for _, name := range []string{"uc-metrics-auth", "uc-metrics-reader"} {
				if m.Find("ClusterRole", name) != nil {
					t.Errorf("ClusterRole %s with plain metrics", name)
				}
			}
			endpoints, _, _ := unstructured.NestedSlice(m.Find("PodMonitor", "uc").Object, "spec", "podMetricsEndpoints")
			if ep := endpoints[0].(map[string]any); ep["scheme"] != nil || ep["authorization"] != nil || m.Find("ServiceAccount", "uc-metrics") != nil {
				t.Errorf("the PodMonitor of plain metrics: %v; want no scheme, no authorization, no ServiceAccount of its own", ep)
			}
		}},
		{"partitions and hook users", map[string]any{
			"partitions": 64,
			"nats": map[string]any{"auth": map[string]any{
				"conf":       authConf(t, 64, "foo.controller"),
				"extraUsers": []any{natsauth.HookUser("foo.controller")},
			}},
		}, func(t *testing.T, m manifests.Set) {
			if got := manifests.Typed[corev1.ConfigMap](t, m, "ConfigMap", "uc-config").Data["UC_PARTITIONS"]; got != "64" {
				t.Errorf("UC_PARTITIONS=%s, want 64", got)
			}
			// The servers start: every password auth.conf reads is in the Secret.
			users := natsConfOf(t, m)["accounts"].(map[string]any)[natsauth.Account].(map[string]any)["users"].([]any)
			if len(users) != 4 {
				t.Errorf("nats.conf has %d users, want the roles' and foo.controller's hook workers'", len(users))
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.check(t, render(t, release, tc.vals)) })
	}
}

// TestDefaultNATSUsersNeedDefaultPartitions: the default NATS users are
// for 32 partitions; other partitions need their own users.
func TestDefaultNATSUsersNeedDefaultPartitions(t *testing.T) {
	if _, err := renderChart(release, map[string]any{"partitions": 64}); err == nil || !strings.Contains(err.Error(), "nats.auth.conf") {
		t.Errorf("partitions 64 with the default NATS users: err %v, want one saying to set nats.auth.conf", err)
	}
	if bus.DefaultPartitions != 32 {
		t.Errorf("uc's default partitions are %d; the chart's (values.yaml, _helpers.tpl) are 32", bus.DefaultPartitions)
	}
}

// TestReleasesApart: two releases in one namespace share no object, and
// select no Pod of each other's.
func TestReleasesApart(t *testing.T) {
	a, b := render(t, release, nil), render(t, "payments", nil)
	for _, o := range b {
		if o.GetKind() == "CustomResourceDefinition" {
			continue // Helm installs them once, and leaves them
		}
		if !strings.HasPrefix(o.GetName(), "payments-uc-") {
			t.Errorf("release payments: %s %s is not named after it", o.GetKind(), o.GetName())
		}
		if a.Find(o.GetKind(), o.GetName()) != nil {
			t.Errorf("releases uc and payments both have %s %s", o.GetKind(), o.GetName())
		}
	}
	for _, role := range manifests.Roles {
		sa := manifests.Typed[appsv1.Deployment](t, b, "Deployment", "payments-uc-"+role).Spec.Selector.MatchLabels
		pod := manifests.Typed[appsv1.Deployment](t, a, "Deployment", "uc-"+role).Spec.Template.Labels
		if matches(sa, pod) {
			t.Errorf("release payments' %s selects release uc's Pods (%v)", role, sa)
		}
	}
	if env := envOf(container(t, b, "payments-uc-watcher")); env["UC_LEADER_ELECT_NAME"] != "payments-uc-watcher" {
		t.Errorf("release payments' watchers elect with Lease %s; want their own", env["UC_LEADER_ELECT_NAME"])
	}
	if got := manifests.Typed[corev1.ConfigMap](t, b, "ConfigMap", "payments-uc-config").Data["UC_NATS_URL"]; got != "nats://payments-uc-nats:4222" {
		t.Errorf("release payments connects to %s; want its own NATS", got)
	}
}

// TestEnvIsFlags: every UC_* variable the chart gives a role, with every
// option on, is a flag of `uc <role>`.
func TestEnvIsFlags(t *testing.T) {
	bin := manifests.BuildUC(t)
	m := render(t, release, allOptions)
	config := manifests.Typed[corev1.ConfigMap](t, m, "ConfigMap", "uc-config").Data
	for _, role := range manifests.Roles {
		flags, err := manifests.RoleFlags(t.Context(), bin, role)
		if err != nil {
			t.Fatal(err)
		}
		vars := envOf(container(t, m, "uc-"+role))
		for k, v := range config {
			vars[k] = v
		}
		for k := range vars {
			if flag, ok := manifests.FlagOf(k); ok && !flags[flag] {
				t.Errorf("the chart sets %s for uc %s, which has no flag --%s", k, role, flag)
			}
		}
	}
}

// container is the uc container of a role's Deployment.
func container(t *testing.T, m manifests.Set, deployment string) corev1.Container {
	t.Helper()
	d := manifests.Typed[appsv1.Deployment](t, m, "Deployment", deployment)
	if len(d.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("%s has no single container", deployment)
	}
	return d.Spec.Template.Spec.Containers[0]
}

// passwordSource is the Secret and key of the NATS password a role's
// Deployment mounts as the file of UC_NATS_PASSWORD_FILE.
func passwordSource(t *testing.T, m manifests.Set, deployment string) (name, key string) {
	t.Helper()
	c := container(t, m, deployment)
	file := envOf(c)["UC_NATS_PASSWORD_FILE"]
	for _, vm := range c.VolumeMounts {
		if !strings.HasPrefix(file, vm.MountPath+"/") {
			continue
		}
		for _, v := range manifests.Typed[appsv1.Deployment](t, m, "Deployment", deployment).Spec.Template.Spec.Volumes {
			if v.Name == vm.Name && v.Secret != nil {
				for _, it := range v.Secret.Items {
					if vm.MountPath+"/"+it.Path == file {
						return v.Secret.SecretName, it.Key
					}
				}
			}
		}
	}
	t.Fatalf("%s: UC_NATS_PASSWORD_FILE %q is no key of a mounted Secret", deployment, file)
	return "", ""
}

// envOf is a container's environment by name; a value from elsewhere is
// its source.
func envOf(c corev1.Container) map[string]string {
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
		if e.ValueFrom != nil {
			env[e.Name] = e.ValueFrom.String()
		}
	}
	return env
}

func matches(selector, labels map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// authConf is `uc nats-config --partitions p --controllers …`.
func authConf(t *testing.T, partitions int, controllers ...string) string {
	t.Helper()
	users, err := natsauth.Users(partitions, controllers...)
	if err != nil {
		t.Fatal(err)
	}
	return natsauth.Config(users)
}

// natsConfOf parses the configuration of the chart's NATS servers, the
// StatefulSet uc-nats, as they would.
func natsConfOf(t *testing.T, m manifests.Set) map[string]any {
	t.Helper()
	return manifests.StatefulSetNATSConf(t, m, manifests.Typed[appsv1.StatefulSet](t, m, "StatefulSet", "uc-nats"))
}
