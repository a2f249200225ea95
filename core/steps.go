package core

import (
	"github.com/pmezard/go-difflib/difflib"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// Steps says what the writes of a plan do to each child, as a person reads
// it (`uc render`, a dry-run controller's plans): the desired children in
// the reply's order — created, updated or recreated with a diff of the
// fields they set, adopted, unchanged, or kept as they are by OnDelete —
// then the live ones deleted or released. desired are the reply's
// children as the plan made them; live holds the live children.
func Steps(ctl *Controller, desired []*unstructured.Unstructured, writes []Write, live Cache) []bus.Step {
	steps := make([]bus.Step, 0, len(desired))
	written := map[*unstructured.Unstructured]bool{}
	byChild := map[string]Write{}
	for _, w := range writes {
		byChild[stepKey(w.Child, w.Object)] = w
	}
	for _, c := range desired {
		child, _ := ctl.Child(c.GetAPIVersion(), c.GetKind()) // planned: it is declared
		step := bus.Step{Action: "unchanged", Kind: hooks.GroupKey(c.GetKind(), c.GetAPIVersion()), Namespace: c.GetNamespace(), Name: c.GetName()}
		w, ok := byChild[stepKey(child, c)]
		if ok {
			step.Action = actions[w.Event]
			written[w.Object] = true
		}
		if cur, err := live.Object(child.GVR, c.GetNamespace(), c.GetName()); err == nil && step.Action != "adopt" {
			switch d := diff(cur, c); {
			case ok:
				step.Diff = d // an update, or a recreate
			case d != "" && child.Method == v1alpha1.ChildUpdateOnDelete:
				step.Action, step.Diff = "kept", d
			}
		}
		steps = append(steps, step)
	}
	for _, w := range writes {
		if !written[w.Object] {
			steps = append(steps, bus.Step{Action: actions[w.Event], Kind: hooks.GroupKey(w.Object.GetKind(), w.Object.GetAPIVersion()),
				Namespace: w.Object.GetNamespace(), Name: w.Object.GetName()})
		}
	}
	return steps
}

func stepKey(c *Child, o *unstructured.Unstructured) string {
	return c.GVR.String() + " " + o.GetNamespace() + "/" + o.GetName()
}

// actions names the applier's writes by the Event they record.
var actions = map[string]string{
	"Created": "create", "Updated": "update", "Adopted": "adopt", "Recreating": "recreate",
	"Deleted": "delete", "Released": "release",
}

// diff is a unified diff from live's fields that want sets to want, or ""
// when they are the same.
func diff(live, want *unstructured.Unstructured) string {
	return unifiedDiff(project(live.Object, want.Object), want.Object, "live", "desired")
}

// unifiedDiff is a unified diff of from and to as YAML, or "" when they
// are the same.
func unifiedDiff(from, to any, fromName, toName string) string {
	a, err := yaml.Marshal(from)
	if err != nil {
		return err.Error()
	}
	b, err := yaml.Marshal(to)
	if err != nil {
		return err.Error()
	}
	d, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: difflib.SplitLines(string(a)), B: difflib.SplitLines(string(b)),
		FromFile: fromName, ToFile: toName, Context: 3,
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
