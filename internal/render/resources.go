package render

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/restmapper"
)

// OfflineMapper knows, without a cluster, the resources of Kubernetes'
// built-in kinds (those of client-go's scheme) and those the CRDs define,
// as the apiserver's discovery would list them: it is client-go's
// discovery mapper, as uc's registry uses it, on what discovery would say.
func OfflineMapper(crds []*unstructured.Unstructured) (meta.RESTMapper, error) {
	groups := map[string]*restmapper.APIGroupResources{}
	var order []string
	add := func(gv schema.GroupVersion, res metav1.APIResource) {
		g := groups[gv.Group]
		if g == nil {
			g = &restmapper.APIGroupResources{Group: metav1.APIGroup{Name: gv.Group}, VersionedResources: map[string][]metav1.APIResource{}}
			groups[gv.Group] = g
			order = append(order, gv.Group)
		}
		if _, ok := g.VersionedResources[gv.Version]; !ok {
			v := metav1.GroupVersionForDiscovery{GroupVersion: gv.String(), Version: gv.Version}
			g.Group.Versions = append(g.Group.Versions, v)
			if len(g.Group.Versions) == 1 {
				g.Group.PreferredVersion = v
			}
		}
		g.VersionedResources[gv.Version] = append(g.VersionedResources[gv.Version], res)
	}
	for _, gv := range scheme.Scheme.PrioritizedVersionsAllGroups() {
		for _, kind := range slices.Sorted(maps.Keys(scheme.Scheme.KnownTypes(gv))) {
			if strings.HasSuffix(kind, "List") || strings.HasSuffix(kind, "Options") {
				continue
			}
			plural, singular := meta.UnsafeGuessKindToResource(gv.WithKind(kind))
			if p, ok := irregularPlurals[gv.WithKind(kind).GroupKind()]; ok {
				plural.Resource = p
			}
			add(gv, metav1.APIResource{Name: plural.Resource, SingularName: singular.Resource, Kind: kind,
				Namespaced: !clusterScoped[gv.WithKind(kind).GroupKind()]})
		}
	}
	for _, u := range crds {
		var crd apiextensionsv1.CustomResourceDefinition
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &crd); err != nil {
			return nil, fmt.Errorf("CustomResourceDefinition %s: %w", u.GetName(), err)
		}
		names := crd.Spec.Names
		for _, v := range crd.Spec.Versions {
			if v.Served {
				add(schema.GroupVersion{Group: crd.Spec.Group, Version: v.Name}, metav1.APIResource{Name: names.Plural, SingularName: names.Singular,
					Kind: names.Kind, Namespaced: crd.Spec.Scope == apiextensionsv1.NamespaceScoped})
			}
		}
	}
	list := make([]*restmapper.APIGroupResources, 0, len(order))
	for _, g := range order {
		list = append(list, groups[g])
	}
	return restmapper.NewDiscoveryRESTMapper(list), nil
}

// clusterScoped are the built-in kinds that are not namespaced (`kubectl
// api-resources --namespaced=false` of Kubernetes 1.35; TestRenderOfflineMapper
// in test/e2e compares them with a real apiserver's).
var clusterScoped = map[schema.GroupKind]bool{
	{Kind: "Namespace"}: true, {Kind: "Node"}: true, {Kind: "PersistentVolume"}: true, {Kind: "ComponentStatus"}: true,
	{Group: "admissionregistration.k8s.io", Kind: "MutatingWebhookConfiguration"}:     true,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingWebhookConfiguration"}:   true,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicy"}:        true,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicyBinding"}: true,
	{Group: "admissionregistration.k8s.io", Kind: "MutatingAdmissionPolicy"}:          true,
	{Group: "admissionregistration.k8s.io", Kind: "MutatingAdmissionPolicyBinding"}:   true,
	{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}:                 true,
	{Group: "apiregistration.k8s.io", Kind: "APIService"}:                             true,
	{Group: "authentication.k8s.io", Kind: "TokenReview"}:                             true,
	{Group: "authentication.k8s.io", Kind: "SelfSubjectReview"}:                       true,
	{Group: "authorization.k8s.io", Kind: "SubjectAccessReview"}:                      true,
	{Group: "authorization.k8s.io", Kind: "SelfSubjectAccessReview"}:                  true,
	{Group: "authorization.k8s.io", Kind: "SelfSubjectRulesReview"}:                   true,
	{Group: "certificates.k8s.io", Kind: "CertificateSigningRequest"}:                 true,
	{Group: "certificates.k8s.io", Kind: "ClusterTrustBundle"}:                        true,
	{Group: "flowcontrol.apiserver.k8s.io", Kind: "FlowSchema"}:                       true,
	{Group: "flowcontrol.apiserver.k8s.io", Kind: "PriorityLevelConfiguration"}:       true,
	{Group: "internal.apiserver.k8s.io", Kind: "StorageVersion"}:                      true,
	{Group: "networking.k8s.io", Kind: "IngressClass"}:                                true,
	{Group: "networking.k8s.io", Kind: "IPAddress"}:                                   true,
	{Group: "networking.k8s.io", Kind: "ServiceCIDR"}:                                 true,
	{Group: "node.k8s.io", Kind: "RuntimeClass"}:                                      true,
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"}:                         true,
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRoleBinding"}:                  true,
	{Group: "resource.k8s.io", Kind: "DeviceClass"}:                                   true,
	{Group: "resource.k8s.io", Kind: "ResourceSlice"}:                                 true,
	{Group: "resource.k8s.io", Kind: "DeviceTaintRule"}:                               true,
	{Group: "scheduling.k8s.io", Kind: "PriorityClass"}:                               true,
	{Group: "storage.k8s.io", Kind: "CSIDriver"}:                                      true,
	{Group: "storage.k8s.io", Kind: "CSINode"}:                                        true,
	{Group: "storage.k8s.io", Kind: "StorageClass"}:                                   true,
	{Group: "storage.k8s.io", Kind: "VolumeAttachment"}:                               true,
	{Group: "storage.k8s.io", Kind: "VolumeAttributesClass"}:                          true,
	{Group: "storagemigration.k8s.io", Kind: "StorageVersionMigration"}:               true,
}

// irregularPlurals are the built-in kinds whose resource is not the
// plural meta.UnsafeGuessKindToResource guesses.
var irregularPlurals = map[schema.GroupKind]string{
	{Kind: "Endpoints"}: "endpoints",
}
