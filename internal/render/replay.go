package render

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"universalcontroller.dev/uc/core"
	"universalcontroller.dev/uc/schemas/hooks"
)

// Replay is a request uc published, to call a hook with again (`uc render
// --from-trace`).
type Replay struct {
	Controller *core.Controller
	// Hook is sync or finalize.
	Hook string
	// Request is the request's JSON, a hooks.SyncRequest.
	Request []byte
	// Cluster, when set, is read (only read) for the Secrets the
	// controller's webhook connects with, and the CustomResourceDefinitions
	// Options.Save writes.
	Cluster *rest.Config
}

// RunReplay renders a call of the hook with a request uc published: the
// hook is called with the request as it is, and its reply checked and
// planned against the children the request observed, as Run does. With
// opts.Save, it first writes the request as files Run reads.
func RunReplay(ctx context.Context, r Replay, opts Options, out, notes io.Writer) error {
	var req hooks.SyncRequest
	if err := json.Unmarshal(r.Request, &req); err != nil {
		return fmt.Errorf("the request: %w", err)
	}
	if req.Parent == nil {
		return fmt.Errorf("the request has no parent")
	}
	in := &inputs{ctl: r.Controller, parent: req.Parent, children: objects{}}
	for _, group := range req.Children {
		for _, o := range group {
			child, ok := in.ctl.Child(o.GetAPIVersion(), o.GetKind())
			if !ok {
				return fmt.Errorf("the request observed a %s, which %s does not declare", hooks.GroupKey(o.GetKind(), o.GetAPIVersion()), in.ctl.Name)
			}
			in.children.add(child.GVR, o)
		}
	}
	var c *cluster
	if r.Cluster != nil {
		var err error
		if c, err = readCluster(r.Cluster); err != nil {
			return err
		}
		in.kube = c.kube
	}
	if opts.Save != "" {
		if err := save(ctx, opts.Save, in.ctl, &req, r.Request, c, notes); err != nil {
			return fmt.Errorf("--save: %w", err)
		}
	}
	if opts.Output == OutputRequest {
		_, err := out.Write(append(r.Request, '\n'))
		return err
	}
	return in.callAndPrint(ctx, in.caller(opts, notes), r.Hook, json.RawMessage(r.Request), opts, out, notes)
}

// save writes a request into dir as the files Run reads: controller.yaml,
// the controller the request carries; crds.yaml, the
// CustomResourceDefinitions of its custom resources, read from c (none
// without c); parent.yaml; observed.yaml and related.yaml, Lists of the
// children and related objects the request observed; and request.json,
// the request as it is. It says in notes how to render them.
func save(ctx context.Context, dir string, ctl *core.Controller, req *hooks.SyncRequest, data []byte, c *cluster, notes io.Writer) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var crds []any
	if c != nil {
		var err error
		if crds, err = c.crdsOf(ctx, ctl); err != nil {
			return err
		}
	}
	files := []struct {
		name string
		v    any
	}{
		{"controller.yaml", req.Controller.Object},
		{"crds.yaml", list(crds)},
		{"parent.yaml", req.Parent.Object},
		{"observed.yaml", list(objectsOf(req.Children))},
		{"related.yaml", list(objectsOf(req.Related))},
	}
	for _, f := range files {
		b, err := yaml.Marshal(f.v)
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, f.name), b, 0o644)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", f.name, err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "request.json"), append(data, '\n'), 0o644); err != nil {
		return err
	}
	at := func(name string) string { return filepath.Join(dir, name) }
	fmt.Fprintf(notes, "note: the request is saved in %s; render it again offline with\n  uc render --controller %s --crd %s --parent %s --observed %s --related %s --exec COMMAND\n",
		dir, at("controller.yaml"), at("crds.yaml"), at("parent.yaml"), at("observed.yaml"), at("related.yaml"))
	return nil
}

// list is a v1 List of items, as `kubectl get -o yaml` writes one.
func list(items []any) map[string]any {
	if items == nil {
		items = []any{}
	}
	return map[string]any{"apiVersion": "v1", "kind": "List", "items": items}
}

// objectsOf lists grouped objects by kind, then key.
func objectsOf(g hooks.GroupedObjects) []any {
	var out []any
	for _, kind := range slices.Sorted(maps.Keys(g)) {
		for _, key := range slices.Sorted(maps.Keys(g[kind])) {
			out = append(out, g[kind][key].Object)
		}
	}
	return out
}

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// crdsOf reads the CustomResourceDefinitions of the controller's parent and
// child resources, those that are custom resources.
func (c *cluster) crdsOf(ctx context.Context, ctl *core.Controller) ([]any, error) {
	resources := []schema.GroupVersionResource{ctl.Parent.GVR}
	for _, child := range ctl.Children {
		resources = append(resources, child.GVR)
	}
	var out []any
	seen := map[string]bool{}
	for _, gvr := range resources {
		name := gvr.Resource + "." + gvr.Group
		if gvr.Group == "" || !strings.Contains(gvr.Group, ".") || seen[name] {
			continue // a built-in resource's group has no dot
		}
		seen[name] = true
		crd, err := c.dyn.Resource(crdResource).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			continue // served by an aggregated API, or a built-in group
		case err != nil:
			return nil, fmt.Errorf("read the CustomResourceDefinition %s: %w", name, err)
		}
		crd.SetManagedFields(nil)
		unstructured.RemoveNestedField(crd.Object, "status")
		out = append(out, crd.Object)
	}
	return out, nil
}
