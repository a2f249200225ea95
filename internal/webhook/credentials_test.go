package webhook

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// TestCredentials: the Secrets and ConfigMaps a webhook's connection
// reads — its own, else the endpoint config of its host's — and only those.
func TestCredentials(t *testing.T) {
	url := func(s string) *string { return &s }
	key := func(ns, name string) v1alpha1.KeyReference { return v1alpha1.KeyReference{Namespace: ns, Name: name} }
	secret := func(ns, name string) v1alpha1.SecretReference {
		return v1alpha1.SecretReference{Namespace: ns, Name: name}
	}
	cred := func(resource, ns, name string) Credential {
		return Credential{resource, types.NamespacedName{Namespace: ns, Name: name}}
	}
	ca, token := key("hooks", "ca"), key("hooks", "token")
	endpoints := []v1alpha1.EndpointConfig{
		{Host: "a.example.com", Connection: v1alpha1.Connection{BasicAuth: &v1alpha1.BasicAuth{SecretRef: secret("shared", "login")}}},
		{Host: "b.example.com:8443", Connection: v1alpha1.Connection{ClientTLS: &v1alpha1.ClientTLS{SecretRef: secret("shared", "cert")}}},
	}
	for _, tc := range []struct {
		name string
		hook v1alpha1.Webhook
		want []Credential
	}{
		{"its own", v1alpha1.Webhook{URL: url("https://a.example.com/sync"), Connection: v1alpha1.Connection{
			CABundle: &v1alpha1.CABundle{ConfigMapRef: &ca}, Authorization: &v1alpha1.Authorization{SecretRef: token}}},
			[]Credential{cred("configmaps", "hooks", "ca"), cred("secrets", "hooks", "token")}},
		{"a CA bundle in a Secret", v1alpha1.Webhook{URL: url("https://c.example.com"), Connection: v1alpha1.Connection{CABundle: &v1alpha1.CABundle{SecretRef: &ca}}},
			[]Credential{cred("secrets", "hooks", "ca")}},
		{"its host's endpoint config", v1alpha1.Webhook{URL: url("https://a.example.com/sync")}, []Credential{cred("secrets", "shared", "login")}},
		{"a service's, by host and port", v1alpha1.Webhook{Service: &v1alpha1.ServiceReference{Name: "b", Namespace: "example.com", Port: new(int32(8443))}},
			[]Credential{cred("secrets", "shared", "cert")}},
		{"none", v1alpha1.Webhook{URL: url("https://c.example.com")}, nil},
		{"no URL", v1alpha1.Webhook{}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Credentials(&tc.hook, endpoints); !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
