package rbac

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"universalcontroller.dev/uc/core"
	"universalcontroller.dev/uc/internal/render"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// Input is what Generate reads.
type Input struct {
	// Paths are files and directories of controller objects, and of the
	// CustomResourceDefinitions of the kinds they name.
	Paths []string
	// FromCluster names controller objects to read from Cluster:
	// [KIND/]NAME, a UniversalController by default.
	FromCluster []string
	// Cluster, when set, is asked (discovery) for the resources the
	// controllers name, before the CRDs among Paths.
	Cluster *rest.Config
	// Related are the resources a customize hook may name, GROUP/RESOURCE
	// ("configmaps" or "core/configmaps" for the core group).
	Related []string
	// Dispatcher is the dispatcher's ServiceAccount, which the Roles of
	// the webhooks' credentials are bound to.
	Dispatcher types.NamespacedName
	// ShardWatchers: the installation's watchers are sharded.
	ShardWatchers bool
	// Command is the command line that runs Generate, said in the output.
	Command string
}

// Generate writes the RBAC of every controller object in.Paths and
// in.FromCluster name to out, one after the other. A resource that
// neither the cluster nor the CRDs given know is an error that names it:
// a plural is never guessed, but for a destination's, which the
// dispatcher itself guesses from the kind.
func Generate(ctx context.Context, in Input, out io.Writer) error {
	objs, err := render.ReadManifests(in.Paths...)
	if err != nil {
		return err
	}
	crds, rest := render.SplitCRDs(objs)
	mapper, err := render.OfflineMapper(crds)
	if err != nil {
		return err
	}
	if in.Cluster != nil {
		fetched, clusterMapper, err := readCluster(ctx, in.Cluster, in.FromCluster)
		if err != nil {
			return err
		}
		rest = append(rest, fetched...)
		mapper = meta.MultiRESTMapper{clusterMapper, mapper}
	}
	opts := Options{ShardWatchers: in.ShardWatchers}
	for _, r := range in.Related {
		gr, err := resolveRelated(mapper, r, in.Cluster != nil)
		if err != nil {
			return err
		}
		opts.Related = append(opts.Related, gr)
	}
	resolve := func(rule v1alpha1.ResourceRule) (core.Resource, error) {
		return resolvePlural(mapper, rule, in.Cluster != nil)
	}
	// uc rbac grants a decorated resource's status either way.
	noStatus := func(core.Resource) (bool, error) { return false, nil }
	n := 0
	for _, o := range rest {
		if !core.IsControllerObject(o) {
			continue
		}
		ctl, err := core.ControllerOf(o, resolve, noStatus)
		if err != nil {
			return fmt.Errorf("%s %s: %w", o.GetKind(), o.GetName(), err)
		}
		grants, err := Needs(ctl, opts)
		if err != nil {
			return fmt.Errorf("%s %s: %w", o.GetKind(), o.GetName(), err)
		}
		if n > 0 {
			if _, err := io.WriteString(out, "---\n"); err != nil {
				return err
			}
		}
		n++
		if err := Write(out, header(ctl, opts, in), Objects(ctl, grants, in.Dispatcher)); err != nil {
			return err
		}
	}
	if n == 0 {
		return errors.New("no controller object (UniversalController, UniversalDecorator, CompositeController, DecoratorController) in what was given")
	}
	return nil
}

// header says what the RBAC is for and how it was made, and what the
// controller object could not tell.
func header(ctl *core.Controller, opts Options, in Input) string {
	var b strings.Builder
	fmt.Fprintf(&b, "The RBAC of the %s %s: what uc's roles do with its kinds, and nothing more. Made by `%s`: make it again when the controller changes, do not edit it. Apply it with the controller; the same command piped to `kubectl delete -f -` removes it.",
		ctl.Object.GetKind(), ctl.Object.GetName(), in.Command)
	for _, note := range Notes(ctl, opts) {
		b.WriteString("\n\n" + note)
	}
	return b.String()
}

// Notes are what a reader of ctl's RBAC must know that its rules do not
// say: the related resources of a customize hook, and why the applier
// may not patch the parents.
func Notes(ctl *core.Controller, opts Options) []string {
	var notes []string
	if ctl.Spec.Hooks.Customize != nil {
		if len(opts.Related) == 0 {
			notes = append(notes, "WARNING: the customize hook names related objects in its replies, which no file tells: none are readable here. Give each resource they may be of with --related GROUP/RESOURCE, or the watcher cannot watch them.")
		} else {
			var names []string
			for _, gr := range opts.Related {
				names = append(names, gr.String())
			}
			notes = append(notes, fmt.Sprintf("The customize hook's related objects may be of %s (as --related says: no file tells).", strings.Join(names, ", ")))
		}
	}
	if len(patchReasons(ctl, opts)) == 0 {
		notes = append(notes, "The applier does not patch the parents: the controller has no finalize hook, and the watchers are not sharded (--shard-watchers). If it had a finalize hook before, parents may still hold uc's finalizer, which the applier takes off with a patch: keep the RBAC made then until they have lost it.")
	}
	return notes
}

// resolvePlural resolves a resource rule as uc does (core.ResolveWith),
// and checks it names the resource by its plural, which is what uc asks
// the apiserver for.
func resolvePlural(mapper meta.RESTMapper, rule v1alpha1.ResourceRule, cluster bool) (core.Resource, error) {
	res, err := core.ResolveWith(mapper, rule)
	if err != nil {
		return res, explainNoMatch(err, cluster)
	}
	if plural, err := mapper.ResourceFor(res.GVR); err == nil && plural.Resource != res.GVR.Resource {
		return res, fmt.Errorf("resource %q of %s: uc asks the apiserver for %s by this name, which serves it as %q: write %q",
			rule.Resource, rule.APIVersion, res.GVK.Kind, plural.Resource, plural.Resource)
	}
	return res, nil
}

// resolveRelated resolves --related GROUP/RESOURCE to the plural of a
// resource the cluster or the CRDs given serve.
func resolveRelated(mapper meta.RESTMapper, s string, cluster bool) (schema.GroupResource, error) {
	group, resource, ok := strings.Cut(s, "/")
	if !ok {
		group, resource = "", s
	}
	if group == "core" {
		group = ""
	}
	if resource == "" || strings.Contains(resource, "/") {
		return schema.GroupResource{}, fmt.Errorf("--related %q: want GROUP/RESOURCE, e.g. apps/deployments or core/configmaps", s)
	}
	gvr, err := mapper.ResourceFor(schema.GroupVersionResource{Group: group, Resource: resource})
	if err != nil {
		return schema.GroupResource{}, fmt.Errorf("--related %q: %w", s, explainNoMatch(err, cluster))
	}
	return gvr.GroupResource(), nil
}

// explainNoMatch says, of a resource nothing knows, where to find it.
func explainNoMatch(err error, cluster bool) error {
	switch {
	case !meta.IsNoMatchError(err):
		return err
	case cluster:
		return fmt.Errorf("%w: neither the cluster nor the CustomResourceDefinitions given serve it", err)
	}
	return fmt.Errorf("%w: give its CustomResourceDefinition with the controller, or --kubeconfig to ask the cluster", err)
}

// controllerKinds are the kinds --from-cluster KIND/NAME may name.
var controllerKinds = map[string]schema.GroupVersionResource{
	"universalcontroller": v1alpha1.Resource, "universalcontrollers": v1alpha1.Resource, "uc": v1alpha1.Resource, "uctl": v1alpha1.Resource,
	"universaldecorator": v1alpha1.DecoratorResource, "universaldecorators": v1alpha1.DecoratorResource, "ucd": v1alpha1.DecoratorResource,
	"compositecontroller": core.CompositeControllerResource, "compositecontrollers": core.CompositeControllerResource, "cc": core.CompositeControllerResource,
	"decoratorcontroller": core.DecoratorControllerResource, "decoratorcontrollers": core.DecoratorControllerResource, "dec": core.DecoratorControllerResource,
}

// readCluster reads the controller objects names name from the cluster of
// cfg, and returns them with the mapper of its discovery.
func readCluster(ctx context.Context, cfg *rest.Config, names []string) ([]*unstructured.Unstructured, meta.RESTMapper, error) {
	disco, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("kubeconfig: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("kubeconfig: %w", err)
	}
	var out []*unstructured.Unstructured
	for _, n := range names {
		kind, name, ok := strings.Cut(n, "/")
		if !ok {
			kind, name = "universalcontroller", n
		}
		gvr, known := controllerKinds[strings.ToLower(kind)]
		if !known || name == "" {
			return nil, nil, fmt.Errorf("--from-cluster %q: want [KIND/]NAME, KIND one of universalcontroller, universaldecorator, compositecontroller, decoratorcontroller", n)
		}
		u, err := dyn.Resource(gvr).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, nil, fmt.Errorf("--from-cluster %s: %w", n, err)
		}
		out = append(out, u)
	}
	return out, restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disco)), nil
}
