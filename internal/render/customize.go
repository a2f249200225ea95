package render

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"universalcontroller.dev/uc/core"
	"universalcontroller.dev/uc/schemas/hooks"
)

// relatedObjects are the related objects of the parent's sync or finalize
// request, as the watcher selects them: none without a customize hook;
// else, the customize hook asked first, those its rules select among the
// observed objects.
func (in *inputs) relatedObjects(ctx context.Context, call caller, hook string) (hooks.GroupedObjects, error) {
	if in.ctl.Spec.Hooks.Customize == nil {
		return hooks.GroupedObjects{}, nil
	}
	rules, _, err := in.customize(ctx, call)
	if err != nil {
		return nil, err
	}
	return in.selectRelated(ctx, rules, in.ctl.HookVersion(hook))
}

// customize calls the customize hook, and checks its reply as the watcher
// does. A reply it would refuse fails the parent's sync, as uc reports it.
func (in *inputs) customize(ctx context.Context, call caller) (core.Rules, []byte, error) {
	reply, err := call(ctx, hooks.Customize, &hooks.CustomizeRequest{Controller: in.ctl.Object, Parent: in.parent})
	if err != nil {
		return core.Rules{}, nil, err
	}
	rules, err := core.CustomizeRules(in.ctl, reply, in.resolve)
	if err != nil {
		return core.Rules{}, nil, core.HookFailed(hooks.Sync, core.CustomizeRejected(err))
	}
	return rules, reply, nil
}

// selectRelated selects the objects the rules select among the observed
// ones, keyed as the hook version asks.
func (in *inputs) selectRelated(ctx context.Context, rules core.Rules, version string) (hooks.GroupedObjects, error) {
	list := func(gvr schema.GroupVersionResource, namespace string, _ labels.Selector) ([]*unstructured.Unstructured, error) {
		return in.world.list(ctx, gvr, namespace)
	}
	namespaces, err := in.world.list(ctx, namespacesGVR, "")
	if err != nil {
		return nil, err
	}
	nsLabels := func(name string) labels.Set {
		for _, ns := range namespaces {
			if ns.GetName() == name {
				return ns.GetLabels()
			}
		}
		return nil
	}
	return rules.Select(in.ctl, in.parent, version, list, nsLabels)
}

var namespacesGVR = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}

// Customized is a rendered customize reply.
type Customized struct {
	Controller string `json:"controller"`
	Hook       string `json:"hook"`
	// RelatedResources are the reply's rules.
	RelatedResources []hooks.RelatedResourceRule `json:"relatedResources"`
	// Related are the objects they select among the observed ones, as the
	// parent's sync requests would carry them.
	Related hooks.GroupedObjects `json:"related"`
}

// renderCustomize calls the customize hook, and prints its rules and the
// related objects they select.
func renderCustomize(ctx context.Context, in *inputs, call caller, opts Options, out io.Writer) error {
	if opts.Output == OutputRequest {
		return printJSON(out, &hooks.CustomizeRequest{Controller: in.ctl.Object, Parent: in.parent})
	}
	rules, reply, err := in.customize(ctx, call)
	if err != nil {
		return err
	}
	var resp hooks.CustomizeResponse
	if err := json.Unmarshal(reply, &resp); err != nil {
		return fmt.Errorf("decode the customize reply: %w", err)
	}
	related, err := in.selectRelated(ctx, rules, in.ctl.HookVersion(hooks.Sync))
	if err != nil {
		return err
	}
	r := &Customized{Controller: in.ctl.Name, Hook: hooks.Customize, RelatedResources: resp.RelatedResources, Related: related}
	if opts.Output == OutputJSON {
		return printJSON(out, r)
	}
	y, err := yaml.Marshal(r)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "# the customize hook of %s for %s %s\n%s", in.ctl.Name, in.parent.GetKind(), objectKey(in.parent), y)
	return err
}
