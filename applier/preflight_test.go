package applier

import (
	"context"
	"log/slog"
	"slices"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	ktesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"universalcontroller.dev/uc/core"
	"universalcontroller.dev/uc/core/coretest"
	"universalcontroller.dev/uc/internal/objtest"
	"universalcontroller.dev/uc/internal/preflight"
	"universalcontroller.dev/uc/internal/tracing"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// refusable is a Preflight that finds the writes of the objects it names
// refusable.
type refusable []string

func (r refusable) CouldRefuse(_ context.Context, w preflight.Write) string {
	if slices.Contains(r, w.New.GetName()) {
		return "it says so"
	}
	return ""
}

// TestDryRunsOnlyWhereSomethingCouldRefuse: a reply's writes are dry-run
// when the apiserver could refuse one of them, and only then; and a
// refusal stops the reply before anything is written.
func TestDryRunsOnlyWhereSomethingCouldRefuse(t *testing.T) {
	ctl := coretest.Controller(v1alpha1.ChildUpdateInPlace)
	parent := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Parent"}}
	parent.SetNamespace("ns")
	parent.SetName("p")
	parent.SetUID("parent-uid")
	for _, tc := range []struct {
		name      string
		preflight Preflight
		refused   string // the object the apiserver refuses
		dryRuns   []string
		created   []string
	}{
		{name: "nothing could refuse", preflight: refusable{}, created: []string{"a", "b", "c"}},
		{name: "the third could be refused", preflight: refusable{"c"}, dryRuns: []string{"b", "c"}, created: []string{"a", "b", "c"}},
		{name: "only the first could be refused", preflight: refusable{"a"}, created: []string{"a", "b", "c"}},
		{name: "no preflight", dryRuns: []string{"b", "c"}, created: []string{"a", "b", "c"}},
		{name: "the third is refused", preflight: refusable{"c"}, refused: "c", dryRuns: []string{"b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dyn := dynamicfake.NewSimpleDynamicClient(runtime.NewScheme())
			var dryRuns, created []string
			dyn.PrependReactor("create", "configmaps", func(act ktesting.Action) (bool, runtime.Object, error) {
				create := act.(ktesting.CreateActionImpl)
				obj := create.Object.(*unstructured.Unstructured)
				if obj.GetName() == tc.refused {
					return true, nil, apierrors.NewInvalid(schema.GroupKind{Kind: "ConfigMap"}, obj.GetName(), field.ErrorList{field.Invalid(field.NewPath("data"), nil, "refused")})
				}
				if slices.Contains(create.CreateOptions.DryRun, metav1.DryRunAll) {
					dryRuns = append(dryRuns, obj.GetName())
					return true, obj, nil
				}
				created = append(created, obj.GetName())
				return false, nil, nil
			})
			w := &writer{dyn: dyn, tracer: tracing.Tracer(nil), events: record.NewFakeRecorder(10), log: slog.New(slog.DiscardHandler), preflight: tc.preflight}
			var actions []core.Write
			for _, name := range []string{"a", "b", "c"} {
				obj, err := coretest.Desired(ctl, parent, objtest.Object("ConfigMap", "", name, map[string]any{"k": "v"}, ""))
				if err != nil {
					t.Fatal(err)
				}
				actions = append(actions, core.Write{Verb: core.VerbCreate, Child: &ctl.Children[0], Object: obj, Event: "Created"})
			}
			_, err := w.execute(t.Context(), ctl, parent, actions)
			if (err != nil) != (tc.refused != "") {
				t.Fatalf("err = %v", err)
			}
			slices.Sort(dryRuns)
			slices.Sort(created)
			if !slices.Equal(dryRuns, tc.dryRuns) || !slices.Equal(created, tc.created) {
				t.Fatalf("dry runs %v and creates %v, want %v and %v", dryRuns, created, tc.dryRuns, tc.created)
			}
		})
	}
}
