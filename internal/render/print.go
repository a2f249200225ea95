package render

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"universalcontroller.dev/uc/core"
	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
)

// The output formats.
const (
	OutputYAML    = "yaml"
	OutputJSON    = "json"
	OutputRequest = "request" // the request, without calling the hook
)

// Result is a rendered sync or finalize reply, as the applier would apply
// it.
type Result struct {
	Controller string `json:"controller"`
	Hook       string `json:"hook"`
	// Parent is the parent with the status the hook sets.
	Parent             *unstructured.Unstructured `json:"parent"`
	ResyncAfterSeconds float64                    `json:"resyncAfterSeconds,omitempty"`
	// Finalized is the finalize hook's answer.
	Finalized *bool `json:"finalized,omitempty"`
	// Events and Conditions are what the reply says back: Events recorded
	// on the parent, conditions set in its status.
	Events     []hooks.Event     `json:"events,omitempty"`
	Conditions []hooks.Condition `json:"conditions,omitempty"`
	// Children are the desired children as uc writes them.
	Children []*unstructured.Unstructured `json:"children"`
	// Plan is what the applier would do to each child, the desired ones
	// in the reply's order, then those it deletes or releases.
	Plan []bus.Step `json:"plan"`
}

// replied is what a reply, a controller's or a decorator's, asks for.
type replied struct {
	status              map[string]any
	children            []*unstructured.Unstructured
	resync              float64
	finalized           bool
	labels, annotations map[string]*string // a decorator's, for the object
	events              []hooks.Event
	conditions          []hooks.Condition
}

func newResult(in *inputs, hook string, resp replied, writes []core.Write) *Result {
	parent := &unstructured.Unstructured{Object: map[string]any{"apiVersion": in.parent.GetAPIVersion(), "kind": in.parent.GetKind()}}
	parent.SetName(in.parent.GetName())
	parent.SetNamespace(in.parent.GetNamespace())
	for field, values := range map[string]map[string]*string{"labels": resp.labels, "annotations": resp.annotations} {
		if values != nil {
			_ = unstructured.SetNestedField(parent.Object, present(values), "metadata", field)
		}
	}
	if resp.status != nil {
		parent.Object["status"] = resp.status
	}
	r := &Result{Controller: in.ctl.Name, Hook: hook, Parent: parent, ResyncAfterSeconds: resp.resync, Children: resp.children,
		Events: resp.events, Conditions: resp.conditions}
	if hook == hooks.Finalize {
		r.Finalized = &resp.finalized
	}
	r.Plan = core.Steps(in.ctl, resp.children, writes, in.children)
	return r
}

// present is a decorator's labels or annotations as the object would
// have them: a null value is a key removed, shown as null.
func present(values map[string]*string) map[string]any {
	out := map[string]any{}
	for k, v := range values {
		if v == nil {
			out[k] = nil
		} else {
			out[k] = *v
		}
	}
	return out
}

// printResult writes the result: as JSON, or as YAML documents — the parent
// with its status, then each desired child — followed by the plan as
// comments.
func printResult(out io.Writer, format string, r *Result) error {
	if format == OutputJSON {
		return printJSON(out, r)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# the %s hook of %s for %s %s\n", r.Hook, r.Controller, r.Parent.GetKind(), objectKey(r.Parent))
	if r.ResyncAfterSeconds > 0 {
		fmt.Fprintf(&b, "# resyncAfterSeconds: %g\n", r.ResyncAfterSeconds)
	}
	if r.Finalized != nil {
		fmt.Fprintf(&b, "# finalized: %t\n", *r.Finalized)
	}
	for _, e := range r.Events {
		fmt.Fprintf(&b, "# event: %s %s: %s\n", e.Type, e.Reason, e.Message)
	}
	for _, c := range r.Conditions {
		fmt.Fprintf(&b, "# condition: %s=%s %s: %s\n", c.Type, c.Status, c.Reason, c.Message)
	}
	if err := document(&b, r.Parent); err != nil {
		return err
	}
	for i, c := range r.Children {
		fmt.Fprintf(&b, "---\n# child %d of %d: %s\n", i+1, len(r.Children), r.Plan[i].Action)
		if err := document(&b, c); err != nil {
			return err
		}
	}
	b.WriteString("---\n# plan:\n")
	if len(r.Plan) == 0 {
		b.WriteString("#   nothing to do: no child desired or observed\n")
	}
	for _, s := range r.Plan {
		fmt.Fprintf(&b, "#   %-9s %s %s\n", s.Action, s.Kind, objectKey(&unstructured.Unstructured{Object: map[string]any{
			"metadata": map[string]any{"namespace": s.Namespace, "name": s.Name}}}))
		for line := range strings.Lines(s.Diff) {
			b.WriteString("#       " + line)
		}
	}
	_, err := io.WriteString(out, b.String())
	return err
}

func document(b *strings.Builder, o *unstructured.Unstructured) error {
	y, err := yaml.Marshal(o.Object)
	if err != nil {
		return err
	}
	b.Write(y)
	return nil
}

func printJSON(out io.Writer, v any) error {
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func objectKey(o *unstructured.Unstructured) string {
	if o.GetNamespace() == "" {
		return o.GetName()
	}
	return o.GetNamespace() + "/" + o.GetName()
}
