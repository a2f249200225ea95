package helmchart

import (
	"encoding/base64"
	"fmt"
	"regexp"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/scheme"

	"universalcontroller.dev/uc/test/manifests"
)

// TestNATSRouteAuth: by default, the chart's NATS servers require a route
// password, random, from the Secret <fullname>-nats-routes, and join each
// other with it; a server without it, or with another, is refused
// (manifests.CheckRouteAuth runs them as their Pods would).
func TestNATSRouteAuth(t *testing.T) {
	m := render(t, release, nil)
	sts := manifests.Typed[appsv1.StatefulSet](t, m, "StatefulSet", "uc-nats")
	conf := natsConfOf(t, m)
	manifests.CheckRoutes(t, conf, sts)
	auth, _ := conf["cluster"].(map[string]any)["authorization"].(map[string]any)
	password := string(manifests.Typed[corev1.Secret](t, m, "Secret", "uc-nats-routes").Data["UC_NATS_ROUTE_PASSWORD"])
	if !regexp.MustCompile(`^[A-Za-z0-9]{32}$`).MatchString(password) || auth["password"] != password || auth["user"] != "uc-route" {
		t.Errorf("route authorization %v, Secret uc-nats-routes has %q; want user uc-route and the Secret's password, 32 random letters and digits", auth, password)
	}
	manifests.CheckRouteAuth(t, m, sts)
}

// TestNATSRouteAuthValues: nats.server.routeAuth's user, password and
// existingSecret.
func TestNATSRouteAuthValues(t *testing.T) {
	for _, tc := range []convention{
		{"user and password", setValues(t, "nats.server.routeAuth.user=peer", "nats.server.routeAuth.password=S3cretRoutes"), func(t *testing.T, m manifests.Set) {
			conf := natsConfOf(t, m)
			manifests.CheckRoutes(t, conf, manifests.Typed[appsv1.StatefulSet](t, m, "StatefulSet", "uc-nats"))
			if auth := conf["cluster"].(map[string]any)["authorization"].(map[string]any); auth["user"] != "peer" || auth["password"] != "S3cretRoutes" {
				t.Errorf("route authorization %v, want the values'", auth)
			}
		}},
		{"existingSecret", setValues(t, "nats.server.routeAuth.existingSecret=my-routes", "nats.server.routeAuth.password=unused"), func(t *testing.T, m manifests.Set) {
			if m.Find("Secret", "uc-nats-routes") != nil {
				t.Error("with existingSecret, the chart makes the Secret uc-nats-routes")
			}
			c := manifests.Typed[appsv1.StatefulSet](t, m, "StatefulSet", "uc-nats").Spec.Template.Spec.Containers[0]
			if env := envOf(c)["UC_NATS_ROUTE_PASSWORD"]; !regexp.MustCompile(`Name:my-routes,.*Key:UC_NATS_ROUTE_PASSWORD`).MatchString(env) {
				t.Errorf("UC_NATS_ROUTE_PASSWORD comes from %s, want my-routes' UC_NATS_ROUTE_PASSWORD", env)
			}
		}},
		{"external NATS", externalNATS, func(t *testing.T, m manifests.Set) {
			if m.Find("Secret", "uc-nats-routes") != nil {
				t.Error("with an external NATS, the chart makes a route password")
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.check(t, render(t, release, tc.vals)) })
	}
}

// TestPasswordsKeptOnUpgrade: an upgrade keeps the route password, the
// NATS users' passwords and the NATS servers' CA and certificate the chart
// made at install, which it finds with
// lookup (here in a fake cluster holding the installed Secrets); an
// install in a cluster without them makes new ones.
func TestPasswordsKeptOnUpgrade(t *testing.T) {
	installed := render(t, release, nil)
	secrets := installed.OfKind("Secret")
	if len(secrets) != 3 {
		t.Fatalf("the chart makes %d Secrets, want the users' passwords, the route password and the NATS servers' certificate", len(secrets))
	}
	var objs []runtime.Object
	for _, s := range secrets {
		objs = append(objs, s)
	}
	upgraded, err := renderRelease(release, nil, fakeCluster{dynamicfake.NewSimpleDynamicClient(scheme.Scheme, objs...)})
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := renderRelease(release, nil, fakeCluster{dynamicfake.NewSimpleDynamicClient(scheme.Scheme)})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets {
		before := secretData(t, installed, s.GetName())
		if len(before) == 0 {
			t.Fatalf("Secret %s holds nothing", s.GetName())
		}
		after, again := secretData(t, upgraded, s.GetName()), secretData(t, fresh, s.GetName())
		for k, v := range before {
			if after[k] != v {
				t.Errorf("the upgrade changed %s of Secret %s", k, s.GetName())
			}
			if again[k] == v {
				t.Errorf("an install without Secret %s made the same %s again: not random", s.GetName(), k)
			}
		}
	}
}

// secretData is the data of a Secret of the set, decoded.
func secretData(t *testing.T, m manifests.Set, name string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for k, v := range m.Find("Secret", name).Object["data"].(map[string]any) {
		b, err := base64.StdEncoding.DecodeString(v.(string))
		if err != nil {
			t.Fatalf("Secret %s %s: %v", name, k, err)
		}
		out[k] = string(b)
	}
	return out
}

// fakeCluster answers the chart's lookups of Secrets from a fake dynamic
// client.
type fakeCluster struct{ dynamic.Interface }

func (c fakeCluster) GetClientFor(apiVersion, kind string) (dynamic.NamespaceableResourceInterface, bool, error) {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil || kind != "Secret" {
		return nil, false, err
	}
	return c.Resource(gv.WithResource("secrets")), true, nil
}

// TestNATSTLS: the chart's NATS bus is closed, as deploy/'s: its servers,
// real nats-server processes from the chart's configuration, join each
// other over mutual TLS with the route password, refuse rogue servers and
// plain clients, keep hook users to their subjects
// (manifests.CheckNATSTLS), and take a rotated password and certificate
// without a restart (manifests.CheckNATSRotation).
func TestNATSTLS(t *testing.T) {
	m := render(t, release, nil)
	servers, objs := manifests.CheckNATSTLS(t, m, manifests.Typed[appsv1.StatefulSet](t, m, "StatefulSet", "uc-nats"))
	manifests.CheckNATSRotation(t, servers, objs.TLS.CA)
}

// TestNATSCertManager: with nats.server.tls.source cert-manager, the
// chart asks cert-manager for the servers' certificate, valid for the
// client Service and every server under the headless Service, from a CA of
// its own or the issuer of nats.server.tls.issuerRef, into the Secret the
// servers mount; it makes no certificate itself.
func TestNATSCertManager(t *testing.T) {
	for _, tc := range []struct {
		name   string
		vals   map[string]any
		issuer string
	}{
		{"own CA", setValues(t, "nats.server.tls.source=cert-manager"), "uc-nats-ca"},
		{"issuerRef", setValues(t, "nats.server.tls.source=cert-manager", "nats.server.tls.issuerRef.kind=ClusterIssuer", "nats.server.tls.issuerRef.name=corp-ca"), "corp-ca"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := render(t, release, tc.vals)
			if m.Find("Secret", "uc-nats-tls") != nil {
				t.Error("with cert-manager, the chart makes the certificate's Secret")
			}
			cert := m.Find("Certificate", "uc-nats")
			if cert == nil {
				t.Fatal("no Certificate uc-nats")
			}
			spec, _ := cert.Object["spec"].(map[string]any)
			names := fmt.Sprint(spec["dnsNames"])
			for _, want := range []string{"uc-nats", "uc-nats.uc-system.svc.cluster.local", "*.uc-nats-headless", "*.uc-nats-headless.uc-system.svc"} {
				if !strings.Contains(names, want+" ") && !strings.HasSuffix(names, want+"]") {
					t.Errorf("Certificate uc-nats: dnsNames %s, want %s among them", names, want)
				}
			}
			issuer, _ := spec["issuerRef"].(map[string]any)
			if spec["secretName"] != "uc-nats-tls" || issuer["name"] != tc.issuer {
				t.Errorf("Certificate uc-nats: secretName %v, issuer %v; want uc-nats-tls from %s", spec["secretName"], issuer, tc.issuer)
			}
			if (m.Find("Issuer", "uc-nats-ca") != nil) != (tc.issuer == "uc-nats-ca") {
				t.Errorf("the chart's own CA Issuer: %t, want %t", m.Find("Issuer", "uc-nats-ca") != nil, tc.issuer == "uc-nats-ca")
			}
		})
	}
}
