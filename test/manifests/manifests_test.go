package manifests

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

const stream = `
---
apiVersion: v1
kind: Namespace
metadata: {name: uc-system}
---
# an empty document
---
apiVersion: v1
kind: ConfigMap
metadata: {name: config, namespace: uc-system}
data: {A: "1"}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: config, namespace: other}
data: {A: "2"}
---
apiVersion: v1
kind: Secret
metadata: {name: passwords, namespace: uc-system}
data: {PW: c2VjcmV0}
stringData: {OTHER: plain}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: app, namespace: uc-system}
spec:
  template:
    spec:
      containers: [{name: app, image: app}]
`

func decoded(t *testing.T) Set {
	t.Helper()
	s, err := Decode([]byte(stream))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func names(s Set) []string {
	var out []string
	for _, o := range s {
		out = append(out, o.GetKind()+" "+o.GetNamespace()+"/"+o.GetName())
	}
	return out
}

func TestDecodeAndFind(t *testing.T) {
	s := decoded(t)
	if got, want := names(s), []string{"Namespace /uc-system", "ConfigMap uc-system/config", "ConfigMap other/config", "Secret uc-system/passwords", "Deployment uc-system/app"}; !slices.Equal(got, want) {
		t.Errorf("decoded %q, want %q (no empty documents)", got, want)
	}
	if got := names(s.OfKind("ConfigMap")); len(got) != 2 {
		t.Errorf("OfKind(ConfigMap) = %q", got)
	}
	if got := names(s.In("")); !slices.Equal(got, []string{"Namespace /uc-system"}) {
		t.Errorf(`In("") = %q, want the cluster-scoped objects`, got)
	}
	if o := s.In("other").Find("ConfigMap", "config"); o == nil || o.GetNamespace() != "other" {
		t.Errorf("In(other).Find = %v", o)
	}
	if o := s.Find("ConfigMap", "nope"); o != nil {
		t.Errorf("Find found %v", o)
	}
	typed, err := As[corev1.ConfigMap](decoded(t).Find("ConfigMap", "config"))
	if err != nil || typed.Data["A"] != "1" {
		t.Errorf("As = %v (err %v)", typed, err)
	}
	if _, err := Decode([]byte("a: [")); err == nil {
		t.Error("Decode took invalid YAML")
	}
}

func TestPodObjects(t *testing.T) {
	s := decoded(t)
	cm, err := s.ConfigMap("other", "config")
	if err != nil || cm.Data["A"] != "2" {
		t.Errorf("ConfigMap(other, config) = %v (err %v)", cm, err)
	}
	if _, err := s.ConfigMap("uc-system", "nope"); err == nil || !strings.Contains(err.Error(), "no ConfigMap uc-system/nope") {
		t.Errorf("a missing ConfigMap: err %v", err)
	}
	sec, err := s.Secret("uc-system", "passwords")
	if err != nil {
		t.Fatal(err)
	}
	if string(sec.Data["PW"]) != "secret" || string(sec.Data["OTHER"]) != "plain" || sec.StringData != nil {
		t.Errorf("Secret data %q stringData %q; want stringData merged into data", sec.Data, sec.StringData)
	}
	cm.Data["A"] = "changed"
	if again, _ := s.ConfigMap("other", "config"); again.Data["A"] != "2" {
		t.Error("changing a ConfigMap ConfigMap returned changed the set")
	}
}

func TestYAMLRoundTrip(t *testing.T) {
	s := decoded(t)
	y, err := s.OfKind("ConfigMap").YAML()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Decode(y)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := names(back), names(s.OfKind("ConfigMap")); !slices.Equal(got, want) {
		t.Errorf("YAML of the ConfigMaps decodes to %q, want %q", got, want)
	}
}

func TestWithMisspeltField(t *testing.T) {
	d := decoded(t).Find("Deployment", "app")
	bad, err := WithMisspeltField(d)
	if err != nil {
		t.Fatal(err)
	}
	containers, _, _ := unstructured.NestedSlice(bad.Object, "spec", "template", "spec", "containers")
	if _, ok := containers[0].(map[string]any)[MisspeltField]; !ok {
		t.Errorf("no %s in %v", MisspeltField, containers[0])
	}
	orig, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	if _, ok := orig[0].(map[string]any)[MisspeltField]; ok {
		t.Error("WithMisspeltField changed the object it copied")
	}
	if _, err := WithMisspeltField(decoded(t).Find("Namespace", "uc-system")); err == nil {
		t.Error("WithMisspeltField took an object without containers")
	}
}

func TestFlagOf(t *testing.T) {
	for _, tc := range []struct {
		variable, flag string
		ok             bool
	}{
		{"UC_NATS_URL", "nats-url", true},
		{"UC_PARTITIONS", "partitions", true},
		{"OTEL_EXPORTER_OTLP_ENDPOINT", "", false},
		{"XUC_A", "", false},
	} {
		if flag, ok := FlagOf(tc.variable); flag != tc.flag || ok != tc.ok {
			t.Errorf("FlagOf(%s) = %q, %t; want %q, %t", tc.variable, flag, ok, tc.flag, tc.ok)
		}
	}
}

func TestAdmits(t *testing.T) {
	policies, err := Decode([]byte(`
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: db, namespace: a}
spec:
  podSelector: {matchLabels: {app: db}}
  policyTypes: [Ingress]
  ingress:
    - from: [{podSelector: {matchLabels: {app: web}}}]
      ports: [{port: sql}]
    - from: [{namespaceSelector: {matchLabels: {team: x}}, podSelector: {matchLabels: {app: job}}}]
      ports: [{port: 9000, endPort: 9010}]
    - from: [{namespaceSelector: {matchLabels: {team: z}}}]
      ports: [{protocol: UDP, port: 53}]
`))
	if err != nil {
		t.Fatal(err)
	}
	db := Target{Namespace: "a", Labels: map[string]string{"app": "db"}, Ports: map[string]int32{"sql": 5432}}
	web := Peer{Namespace: "a", Labels: map[string]string{"app": "web"}}
	for _, tc := range []struct {
		name string
		from Peer
		to   Target
		port int32
		want bool
	}{
		{"a selected peer to a named port", web, db, 5432, true},
		{"a selected peer to another port", web, db, 5433, false},
		{"a peer of the pod selector in another namespace", Peer{Namespace: "b", Labels: web.Labels}, db, 5432, false},
		{"namespace and pod selectors, both match", Peer{Namespace: "b", NamespaceLabels: map[string]string{"team": "x"}, Labels: map[string]string{"app": "job"}}, db, 9005, true},
		{"namespace and pod selectors, the pod's only", Peer{Namespace: "b", Labels: map[string]string{"app": "job"}}, db, 9005, false},
		{"past the end port", Peer{Namespace: "b", NamespaceLabels: map[string]string{"team": "x"}, Labels: map[string]string{"app": "job"}}, db, 9011, false},
		{"a UDP rule does not allow TCP", Peer{Namespace: "c", NamespaceLabels: map[string]string{"team": "z"}}, db, 53, false},
		{"a Pod no policy selects", Peer{Namespace: "z"}, Target{Namespace: "a", Labels: map[string]string{"app": "other"}}, 1, true},
		{"a Pod of the labels in another namespace", Peer{Namespace: "z"}, Target{Namespace: "b", Labels: db.Labels}, 1, true},
	} {
		if got := policies.Admits(t, tc.from, tc.to, tc.port); got != tc.want {
			t.Errorf("%s: Admits %t, want %t", tc.name, got, tc.want)
		}
	}
}
