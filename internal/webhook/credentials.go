package webhook

import (
	"k8s.io/apimachinery/pkg/types"

	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// Credential is a Secret or ConfigMap a webhook's connection reads: its
// resource ("secrets" or "configmaps"), namespace and name.
type Credential struct {
	Resource string
	types.NamespacedName
}

// Credentials are the Secrets and ConfigMaps the dispatcher gets, by
// name, to call the webhook: those of the connection it is called with
// (connectionFor) — its caBundle, clientTLS, authorization and basicAuth.
// A webhook whose URL cannot be built reads none: it is never called.
func Credentials(w *v1alpha1.Webhook, endpoints []v1alpha1.EndpointConfig) []Credential {
	u, err := webhookURL(w)
	if err != nil {
		return nil
	}
	c := connectionFor(w, u, endpoints)
	var out []Credential
	add := func(resource, namespace, name string) {
		out = append(out, Credential{resource, types.NamespacedName{Namespace: namespace, Name: name}})
	}
	if b := c.CABundle; b != nil && b.SecretRef != nil {
		add("secrets", b.SecretRef.Namespace, b.SecretRef.Name)
	}
	if b := c.CABundle; b != nil && b.ConfigMapRef != nil {
		add("configmaps", b.ConfigMapRef.Namespace, b.ConfigMapRef.Name)
	}
	if c.ClientTLS != nil {
		add("secrets", c.ClientTLS.SecretRef.Namespace, c.ClientTLS.SecretRef.Name)
	}
	if c.Authorization != nil {
		add("secrets", c.Authorization.SecretRef.Namespace, c.Authorization.SecretRef.Name)
	}
	if c.BasicAuth != nil {
		add("secrets", c.BasicAuth.SecretRef.Namespace, c.BasicAuth.SecretRef.Name)
	}
	return out
}
