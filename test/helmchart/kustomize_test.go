package helmchart

import (
	"maps"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"universalcontroller.dev/uc/test/manifests"
)

// TestDefaultsMatchKustomize renders the chart with its defaults, released
// as "uc" in uc-system, and compares every object with the kustomize
// install's (`kubectl kustomize deploy`): the same kinds and names, and
// field for field the same RBAC rules, Deployments, environment, probes,
// NATS StatefulSet and configuration. Only these differences are allowed,
// each as Helm does things:
//   - names: kustomize suffixes generated ConfigMaps and Secrets with a
//     hash of their content, the chart rolls the Pods with a checksum
//     annotation instead; the NATS objects carry the release's prefix
//     (nats is uc-nats);
//   - Helm's labels (helm.sh/chart, app.kubernetes.io/managed-by, instance,
//     version; instance is in the selectors too, so that two releases
//     never select each other's Pods);
//   - the Namespace: Helm installs into one (--create-namespace);
//   - the CRDs: Helm installs crds/ as they are, without kustomize's
//     app.kubernetes.io/part-of label;
//   - the NATS passwords: random, where kustomize has placeholders;
//   - nats.conf is compared as the NATS server parses it (its comments
//     differ); the routes the StatefulSet gives it name the renamed
//     objects.
func TestDefaultsMatchKustomize(t *testing.T) {
	chart := render(t, release, nil)
	kust, err := manifests.Kustomize(t.Context(), repoRoot+"/deploy")
	if err != nil {
		t.Fatal(err)
	}

	rename := kustomizeNames(kust)
	var want []*unstructured.Unstructured
	for _, o := range kust {
		switch o.GetKind() {
		case "Namespace":
			if o.GetName() != namespace {
				t.Errorf("the kustomize install has a Namespace %s", o.GetName())
			}
			continue
		case "CustomResourceDefinition":
			labels := o.GetLabels()
			delete(labels, "app.kubernetes.io/part-of")
			if len(labels) == 0 {
				labels = nil
			}
			o.SetLabels(labels)
		}
		o.Object = mapStrings(o.Object, func(s string) string {
			if n, ok := rename[s]; ok {
				s = n
			}
			return natsRoutes.Replace(s)
		}).(map[string]any)
		if n, ok := natsNames[o.GetName()]; ok {
			o.SetName(n)
		}
		want = append(want, o)
	}

	for _, o := range chart {
		stripHelm(o.Object)
	}
	for _, w := range want {
		got := chart.Find(w.GetKind(), w.GetName())
		if got == nil {
			t.Errorf("the chart has no %s %s", w.GetKind(), w.GetName())
			continue
		}
		switch w.GetKind() {
		case "Secret":
			forgetValues(w, got)
		case "ConfigMap":
			compareNATSConf(t, w, got)
		}
		if diff := cmp.Diff(w.Object, got.Object); diff != "" {
			t.Errorf("%s %s differs from the kustomize install's (-kustomize +chart):\n%s", w.GetKind(), w.GetName(), diff)
		}
	}
	for _, o := range chart {
		// The NATS servers' certificate: the kustomize install's is made
		// beside it (uc nats-certs, or its cert-manager component).
		if o.GetKind() == "Secret" && o.GetName() == "uc-nats-tls" {
			continue
		}
		if manifests.Set(want).Find(o.GetKind(), o.GetName()) == nil {
			t.Errorf("the chart has %s %s, the kustomize install does not", o.GetKind(), o.GetName())
		}
	}
}

// natsNames are the names of the kustomize install's NATS objects and the
// chart's, which prefixes them with the release's name.
var natsNames = map[string]string{
	"nats":          "uc-nats",
	"nats-headless": "uc-nats-headless",
	"nats-config":   "uc-nats-config",
}

// kustomizeHash is the content hash kustomize appends to generated names.
var kustomizeHash = regexp.MustCompile(`^(.+)-[a-z0-9]{10}$`)

// kustomizeNames maps the names the kustomize install's objects refer to
// onto the chart's: generated names lose their hash, NATS objects gain
// the prefix, and so does the NATS URL.
func kustomizeNames(kust manifests.Set) map[string]string {
	rename := map[string]string{"nats://nats:4222": "nats://uc-nats:4222"}
	maps.Copy(rename, natsNames)
	delete(rename, "nats") // also a label value and a container name; renamed as an object name only
	for _, o := range kust {
		if k := o.GetKind(); k != "ConfigMap" && k != "Secret" {
			continue
		}
		if m := kustomizeHash.FindStringSubmatch(o.GetName()); m != nil {
			rename[o.GetName()] = m[1]
			if n, ok := natsNames[m[1]]; ok {
				rename[o.GetName()] = n
			}
		}
	}
	return rename
}

// mapStrings replaces every string of v with what fn makes of it.
func mapStrings(v any, fn func(string) string) any {
	switch v := v.(type) {
	case string:
		return fn(v)
	case map[string]any:
		for k, e := range v {
			v[k] = mapStrings(e, fn)
		}
	case []any:
		for i, e := range v {
			v[i] = mapStrings(e, fn)
		}
	}
	return v
}

// natsRoutes renames the NATS servers in the routes of the kustomize
// install (nats://uc-route:…@nats-0.nats-headless:6222) as the chart names
// them.
var natsRoutes = strings.NewReplacer("@nats-", "@uc-nats-", ".nats-headless:", ".uc-nats-headless:")

// helmKeys are the labels and annotations of the chart that the kustomize
// install has no counterpart of.
var helmKeys = []string{
	"helm.sh/chart", "app.kubernetes.io/managed-by", "app.kubernetes.io/instance", "app.kubernetes.io/version",
	"checksum/config",
}

// stripHelm removes helmKeys from every map in v, and maps that held only
// them. It reports whether v became empty.
func stripHelm(v any) bool {
	switch v := v.(type) {
	case map[string]any:
		if len(v) == 0 {
			return false
		}
		for _, k := range helmKeys {
			delete(v, k)
		}
		for k, e := range v {
			if stripHelm(e) {
				delete(v, k)
			}
		}
		return len(v) == 0
	case []any:
		for _, e := range v {
			stripHelm(e)
		}
	}
	return false
}

// forgetValues blanks the values of two Secrets, keeping their keys.
func forgetValues(secrets ...*unstructured.Unstructured) {
	for _, s := range secrets {
		data, _ := s.Object["data"].(map[string]any)
		for k := range data {
			data[k] = ""
		}
	}
}

// compareNATSConf compares the nats.conf of two ConfigMaps as the NATS
// server parses it, with the kustomize routes renamed, and removes it from
// both.
func compareNATSConf(t *testing.T, kust, chart *unstructured.Unstructured) {
	t.Helper()
	kd, _ := kust.Object["data"].(map[string]any)
	cd, _ := chart.Object["data"].(map[string]any)
	if _, ok := kd["nats.conf"]; !ok {
		return
	}
	want := manifests.NATSConf(t, files(kd), anyPasswords(kd))
	if diff := cmp.Diff(want, manifests.NATSConf(t, files(cd), anyPasswords(cd))); diff != "" {
		t.Errorf("nats.conf of ConfigMap %s differs from the kustomize install's (-kustomize +chart):\n%s", chart.GetName(), diff)
	}
	delete(kd, "nats.conf")
	delete(cd, "nats.conf")
}

// files is a ConfigMap's data, as the files of its volume.
func files(data map[string]any) map[string]string {
	out := map[string]string{}
	for name, text := range data {
		out[name], _ = text.(string)
	}
	return out
}

// anyPasswords sets every variable of uc's that the files of a
// ConfigMap's data read: the users' passwords, the route password and the
// routes (whose values the StatefulSets give, and are compared there).
func anyPasswords(data map[string]any) map[string]string {
	env := map[string]string{}
	for _, text := range files(data) {
		for _, v := range confVariable.FindAllStringSubmatch(text, -1) {
			env[v[1]] = "secret-" + v[1]
		}
	}
	return env
}

var confVariable = regexp.MustCompile(`\$(UC_NATS_[A-Z0-9_]+|POD_NAME)`)
