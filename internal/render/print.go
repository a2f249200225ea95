package render

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/pmezard/go-difflib/difflib"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"universalcontroller.dev/uc/applier"
	"universalcontroller.dev/uc/internal/registry"
	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/schemas/v1alpha1"
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
	Plan []Step `json:"plan"`
}

// Step is what the applier would do to one child.
type Step struct {
	// Action is create, update, recreate (delete, then create), adopt,
	// delete, release (no longer the parent's), unchanged, or kept (it
	// differs, but its update method leaves it as it is).
	Action    string `json:"action"`
	Kind      string `json:"kind"` // as a request groups it, e.g. Deployment.apps/v1
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	// Diff is a unified diff from the live child's fields that the
	// desired child sets to the desired child.
	Diff string `json:"diff,omitempty"`
}

// actions names the applier's writes by the Event they record.
var actions = map[string]string{
	"Created": "create", "Updated": "update", "Adopted": "adopt", "Recreating": "recreate",
	"Deleted": "delete", "Released": "release",
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

func newResult(in *inputs, hook string, resp replied, writes []applier.Write) *Result {
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
	written := map[*unstructured.Unstructured]bool{}
	byChild := map[string]applier.Write{}
	for _, w := range writes {
		byChild[stepKey(w.Child, w.Object)] = w
	}
	for _, c := range resp.children {
		child, _ := in.ctl.Child(c.GetAPIVersion(), c.GetKind()) // checked: it is declared
		step := Step{Action: "unchanged", Kind: hooks.GroupKey(c.GetKind(), c.GetAPIVersion()), Namespace: c.GetNamespace(), Name: c.GetName()}
		w, ok := byChild[stepKey(child, c)]
		if ok {
			step.Action = actions[w.Event]
			written[w.Object] = true
		}
		if live, err := in.children.Object(child.GVR, c.GetNamespace(), c.GetName()); err == nil && step.Action != "adopt" {
			switch d := diff(live, c); {
			case ok:
				step.Diff = d // an update, or a recreate
			case d != "" && child.Method == v1alpha1.ChildUpdateOnDelete:
				step.Action, step.Diff = "kept", d
			}
		}
		r.Plan = append(r.Plan, step)
	}
	for _, w := range writes {
		if !written[w.Object] {
			r.Plan = append(r.Plan, Step{Action: actions[w.Event], Kind: hooks.GroupKey(w.Object.GetKind(), w.Object.GetAPIVersion()),
				Namespace: w.Object.GetNamespace(), Name: w.Object.GetName()})
		}
	}
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

func stepKey(c *registry.Child, o *unstructured.Unstructured) string {
	return c.GVR.String() + " " + o.GetNamespace() + "/" + o.GetName()
}

// diff is a unified diff from live's fields that want sets to want, or ""
// when they are the same.
func diff(live, want *unstructured.Unstructured) string {
	from, err := yaml.Marshal(project(live.Object, want.Object))
	if err != nil {
		return err.Error()
	}
	to, err := yaml.Marshal(want.Object)
	if err != nil {
		return err.Error()
	}
	d, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: difflib.SplitLines(string(from)), B: difflib.SplitLines(string(to)),
		FromFile: "live", ToFile: "desired", Context: 3,
	})
	if err != nil {
		return err.Error()
	}
	return d
}

// project is live's part that want sets: maps keep the keys want has,
// lists their entries by position; the rest is live as it is.
func project(live, want any) any {
	switch w := want.(type) {
	case map[string]any:
		l, ok := live.(map[string]any)
		if !ok {
			return live
		}
		out := map[string]any{}
		for k, wv := range w {
			if lv, ok := l[k]; ok {
				out[k] = project(lv, wv)
			}
		}
		return out
	case []any:
		l, ok := live.([]any)
		if !ok {
			return live
		}
		out := make([]any, len(l))
		for i, lv := range l {
			out[i] = lv
			if i < len(w) {
				out[i] = project(lv, w[i])
			}
		}
		return out
	}
	return live
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
