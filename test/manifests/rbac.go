package manifests

import (
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// AggregateLabel, followed by a role's name, labels the ClusterRoles whose
// rules the role's aggregated ClusterRole gets.
const AggregateLabel = "universalcontroller.dev/aggregate-to-"

// ControllerRBAC is the RBAC deploy/README.md tells a controller's author
// to add: a read role aggregated into every uc role (parent and children:
// get, list, watch) and an apply role aggregated into the applier
// (children: create, update, patch, delete; parent: status update and
// patch, patch for the finalizer, finalizers update for
// blockOwnerDeletion). withApply false gives the read role only.
func ControllerRBAC(ctl *v1alpha1.UniversalController, withApply bool) []rbacv1.ClusterRole {
	gr := func(r v1alpha1.ResourceRule) (string, string) {
		gv, _ := schema.ParseGroupVersion(r.APIVersion)
		return gv.Group, r.Resource
	}
	pg, pr := gr(ctl.Spec.ParentResource.ResourceRule)
	read := rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "uc-e2e-deploy-" + ctl.Name + "-read", Labels: map[string]string{
		AggregateLabel + "watcher": "true", AggregateLabel + "applier": "true", AggregateLabel + "dispatcher": "true"}}}
	apply := rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "uc-e2e-deploy-" + ctl.Name + "-apply", Labels: map[string]string{
		AggregateLabel + "applier": "true"}}}
	rule := func(group, resource string, verbs ...string) rbacv1.PolicyRule {
		return rbacv1.PolicyRule{APIGroups: []string{group}, Resources: []string{resource}, Verbs: verbs}
	}
	read.Rules = append(read.Rules, rule(pg, pr, "get", "list", "watch"))
	for _, c := range ctl.Spec.ChildResources {
		g, r := gr(c.ResourceRule)
		read.Rules = append(read.Rules, rule(g, r, "get", "list", "watch"))
		apply.Rules = append(apply.Rules, rule(g, r, "create", "update", "patch", "delete"))
	}
	apply.Rules = append(apply.Rules, rule(pg, pr+"/status", "update", "patch"), rule(pg, pr, "patch"), rule(pg, pr+"/finalizers", "update"))
	if !withApply {
		return []rbacv1.ClusterRole{read}
	}
	return []rbacv1.ClusterRole{read, apply}
}
