// Package rbac works out the RBAC a controller needs from its controller
// object — what uc's watcher, dispatcher and applier do with each of its
// kinds, as their code does it — and writes it as ClusterRoles labelled
// for aggregation into the roles' ClusterRoles, and, for the Secrets and
// ConfigMaps its webhooks' connections name, Roles and RoleBindings that
// let the dispatcher get those objects by name. uc rbac prints it.
package rbac

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"universalcontroller.dev/uc/core"
	"universalcontroller.dev/uc/internal/webhook"
	"universalcontroller.dev/uc/schemas/hooks"
)

// Role is one of uc's roles, each with its ServiceAccount and aggregated
// ClusterRole.
type Role string

// uc's roles.
const (
	Watcher    Role = "watcher"
	Dispatcher Role = "dispatcher"
	Applier    Role = "applier"
)

// Roles are uc's roles, in the order their ClusterRoles are written.
var Roles = []Role{Watcher, Dispatcher, Applier}

// AggregateLabel labels a ClusterRole whose rules the role's aggregated
// ClusterRole (uc-<role>) takes in.
func (r Role) AggregateLabel() string { return "universalcontroller.dev/aggregate-to-" + string(r) }

// Grant is one permission a role needs: verbs on a resource (with its
// subresource, "foos/status"), in every namespace or, with Namespace, in
// one, on any object or, with Names, on those only; Why says what uses it.
type Grant struct {
	Role      Role
	Group     string
	Resource  string
	Verbs     []string
	Namespace string
	Names     []string
	Why       string
}

// Options are what the controller object does not say.
type Options struct {
	// Related are the resources a customize hook may name (its replies
	// do, at run time): the watcher lists and watches them.
	Related []schema.GroupResource
	// ShardWatchers: the installation's watchers are sharded
	// (--shard-watchers), so the applier labels parents with their
	// partition.
	ShardWatchers bool
}

// verbOrder is the order verbs are written in.
var verbOrder = []string{"get", "list", "watch", "create", "update", "patch", "delete"}

// Needs are the grants uc's roles need to run ctl, merged: one per role,
// resource, namespace and names, its verbs the union of what each use
// needs.
func Needs(ctl *core.Controller, opts Options) ([]Grant, error) {
	parents, children := "parents", "children"
	if ctl.Decorator != nil {
		parents, children = "decorated objects", "attachments"
	}
	var all []Grant
	add := func(role Role, gr schema.GroupResource, why string, verbs ...string) {
		all = append(all, Grant{Role: role, Group: gr.Group, Resource: gr.Resource, Verbs: verbs, Why: why})
	}
	var parentGRs []schema.GroupResource
	for _, gvr := range ctl.ParentResources() {
		parentGRs = append(parentGRs, gvr.GroupResource())
	}
	// Every role caches the parents of the controllers it runs
	// (internal/registry): informers list and watch. The watcher and the
	// applier cache their children too; the dispatcher lists them once,
	// to report a refused list on the controller (registry.WithParentsOnly).
	for _, role := range Roles {
		for _, gr := range parentGRs {
			add(role, gr, parents+": cached (list, watch)", "list", "watch")
		}
		for _, c := range ctl.Children {
			if role == Dispatcher {
				add(role, c.GVR.GroupResource(), children+": listed once as the controller registers, to report a refused list (list)", "list")
				continue
			}
			add(role, c.GVR.GroupResource(), children+": cached (list, watch)", "list", "watch")
		}
	}
	patchParents := patchReasons(ctl, opts)
	status := "the hook's status, with uc's conditions (server-side apply)"
	if ctl.Decorator != nil {
		status = "the status the hook sets, where the resource has a status subresource (server-side apply)"
	}
	for _, gr := range parentGRs {
		add(Applier, gr, "read again when the cache lags (get)", "get")
		if len(patchParents) > 0 {
			add(Applier, gr, strings.Join(patchParents, ", ")+" (patch)", "patch")
		}
		add(Applier, subresource(gr, "status"), status, "patch")
		if len(ctl.Children) > 0 || ctl.Rolling() {
			add(Applier, subresource(gr, "finalizers"), children+" are owned with blockOwnerDeletion, which the OwnerReferencesPermissionEnforcement admission plugin allows only to who may update the owner's finalizers", "update")
		}
	}
	for _, c := range ctl.Children {
		add(Applier, c.GVR.GroupResource(), "created, applied (server-side apply), released, labelled and deleted; read when a create finds one in the way", "get", "create", "patch", "delete")
	}
	for _, gr := range opts.Related {
		add(Watcher, gr, "related objects a customize hook names (--related): watched", "list", "watch")
	}
	hookGrants, err := hookNeeds(ctl)
	if err != nil {
		return nil, err
	}
	return merge(append(all, hookGrants...)), nil
}

// patchReasons are why the applier patches parents (decorated objects):
// none when it does not.
func patchReasons(ctl *core.Controller, opts Options) []string {
	var why []string
	if ctl.Decorator != nil {
		why = append(why, "the labels, annotations and status the hook sets")
	}
	if ctl.Spec.Hooks.Finalize != nil || ctl.Metacontroller {
		// A Metacontroller controller's parents may hold Metacontroller's
		// finalizer, which uc takes off.
		why = append(why, "uc's finalizer, added and removed")
	}
	if opts.ShardWatchers {
		why = append(why, "the partition label of sharded watchers")
	}
	return why
}

// hookNeeds are what the dispatcher reads to call the hooks that are not
// on the bus: a destination's object, which knative.dev/pkg's resolver
// watches for its address, and the Secrets and ConfigMaps a webhook's
// connection names, got by name in their namespaces.
func hookNeeds(ctl *core.Controller) ([]Grant, error) {
	var out []Grant
	for _, name := range hooks.All {
		h := ctl.Spec.Hooks.Named(name)
		switch {
		case h == nil:
		case h.Destination != nil && h.Destination.Ref != nil:
			ref := h.Destination.Ref
			gv, err := schema.ParseGroupVersion(ref.APIVersion)
			if err != nil || ref.APIVersion == "" {
				return nil, fmt.Errorf("hooks.%s.destination.ref: apiVersion %q: give the apiVersion of the %s", name, ref.APIVersion, ref.Kind)
			}
			// The resolver guesses the resource from the kind, and
			// requests that: so must the rule.
			gvr, _ := meta.UnsafeGuessKindToResource(gv.WithKind(ref.Kind))
			out = append(out, Grant{Role: Dispatcher, Group: gvr.Group, Resource: gvr.Resource, Verbs: []string{"list", "watch"},
				Why: fmt.Sprintf("the %s hook's destination, %s %s: watched for its address", name, ref.Kind, ref.Name)})
		case h.Webhook != nil:
			for _, c := range webhook.Credentials(h.Webhook, ctl.Spec.EndpointConfigs) {
				if c.Namespace == "" {
					return nil, fmt.Errorf("hooks.%s.webhook: the %s %q it reads has no namespace", name, strings.TrimSuffix(c.Resource, "s"), c.Name)
				}
				out = append(out, Grant{Role: Dispatcher, Resource: c.Resource, Verbs: []string{"get"}, Namespace: c.Namespace, Names: []string{c.Name},
					Why: "the webhooks' TLS and credentials, got by name"})
			}
		}
	}
	return out, nil
}

func subresource(gr schema.GroupResource, sub string) schema.GroupResource {
	return schema.GroupResource{Group: gr.Group, Resource: gr.Resource + "/" + sub}
}

// merge merges the grants of one role on one resource in one namespace
// (and the named objects of one resource in one namespace), in the order
// they first come: the union of their verbs, names and reasons.
func merge(grants []Grant) []Grant {
	type key struct {
		role                       Role
		group, resource, namespace string
		named                      bool
	}
	var out []Grant
	at := map[key]int{}
	for _, g := range grants {
		k := key{g.Role, g.Group, g.Resource, g.Namespace, len(g.Names) > 0}
		i, ok := at[k]
		if !ok {
			at[k] = len(out)
			g.Verbs, g.Names = slices.Clone(g.Verbs), slices.Clone(g.Names)
			out = append(out, g)
			continue
		}
		m := &out[i]
		m.Verbs = union(m.Verbs, g.Verbs)
		m.Names = union(m.Names, g.Names)
		if !slices.Contains(strings.Split(m.Why, "; "), g.Why) {
			m.Why += "; " + g.Why
		}
	}
	for i := range out {
		slices.SortFunc(out[i].Verbs, func(a, b string) int {
			return cmp.Compare(slices.Index(verbOrder, a), slices.Index(verbOrder, b))
		})
		slices.Sort(out[i].Names)
	}
	return out
}

func union(a, b []string) []string {
	for _, s := range b {
		if !slices.Contains(a, s) {
			a = append(a, s)
		}
	}
	return a
}

// Prefix is the start of the names of a controller's RBAC objects:
// uc-controller-<name> for a UniversalController, uc-decorator-<name> for
// a UniversalDecorator, uc-compositecontroller-<name> and
// uc-decoratorcontroller-<name> for Metacontroller's objects.
func Prefix(ctl *core.Controller) string {
	kind := strings.ToLower(ctl.Object.GetKind())
	kind = strings.TrimPrefix(kind, "universal")
	return "uc-" + kind + "-" + ctl.Object.GetName()
}

// Object is one RBAC object to write, with a comment above it and one
// above each of its rules.
type Object struct {
	Object       any
	Comment      string
	RuleComments []string
}

// Objects are the RBAC objects that grant the grants: per role, a
// ClusterRole labelled for aggregation into the role's ClusterRole, with
// the grants in every namespace; per namespace of the dispatcher's named
// grants, a Role and a RoleBinding to the dispatcher's ServiceAccount.
func Objects(ctl *core.Controller, grants []Grant, dispatcher types.NamespacedName) []Object {
	prefix := Prefix(ctl)
	var out []Object
	for _, role := range Roles {
		cr := &rbacv1.ClusterRole{ObjectMeta: objectMeta(prefix+"-"+string(role), "")}
		cr.APIVersion, cr.Kind = rbacv1.SchemeGroupVersion.String(), "ClusterRole"
		cr.Labels = map[string]string{role.AggregateLabel(): "true"}
		o := Object{Object: cr, Comment: fmt.Sprintf("uc-%s: %s", role, roleDoes[role])}
		for _, g := range grants {
			if g.Role == role && g.Namespace == "" {
				cr.Rules = append(cr.Rules, rule(g))
				o.RuleComments = append(o.RuleComments, g.Why)
			}
		}
		if len(cr.Rules) > 0 {
			out = append(out, o)
		}
	}
	var namespaces []string
	for _, g := range grants {
		if g.Namespace != "" && !slices.Contains(namespaces, g.Namespace) {
			namespaces = append(namespaces, g.Namespace)
		}
	}
	slices.Sort(namespaces)
	for _, ns := range namespaces {
		name := prefix + "-dispatcher"
		r := &rbacv1.Role{ObjectMeta: objectMeta(name, ns)}
		r.APIVersion, r.Kind = rbacv1.SchemeGroupVersion.String(), "Role"
		o := Object{Object: r, Comment: fmt.Sprintf("uc-dispatcher, in %s: the Secrets and ConfigMaps the webhooks' connections name (caBundle, clientTLS, authorization, basicAuth), got by name, and nothing else there", ns)}
		for _, g := range grants {
			if g.Namespace == ns {
				r.Rules = append(r.Rules, rule(g))
				o.RuleComments = append(o.RuleComments, g.Why)
			}
		}
		b := &rbacv1.RoleBinding{ObjectMeta: objectMeta(name, ns),
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: dispatcher.Namespace, Name: dispatcher.Name}}}
		b.APIVersion, b.Kind = rbacv1.SchemeGroupVersion.String(), "RoleBinding"
		out = append(out, o, Object{Object: b, Comment: fmt.Sprintf("The dispatcher's ServiceAccount, %s (--dispatcher-service-account), gets them.", dispatcher)})
	}
	return out
}

// roleDoes says what each role does with a controller's kinds.
var roleDoes = map[Role]string{
	Watcher:    "watches the controller's kinds, and writes nothing.",
	Dispatcher: "caches the controller's parents, to report on the controller, and reads what its hooks that are not on the bus need.",
	Applier:    "writes what the controller's hooks reply, and nothing else.",
}

func rule(g Grant) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{APIGroups: []string{g.Group}, Resources: []string{g.Resource}, ResourceNames: g.Names, Verbs: g.Verbs}
}

func objectMeta(name, namespace string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: namespace}
}
