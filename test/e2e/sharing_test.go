package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// watches counts the watches open at the apiserver on a resource, from its
// /metrics.
func watches(ctx context.Context, resource string) (int, error) {
	b, err := env.kube.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "apiserver_longrunning_requests{") && strings.Contains(line, `verb="WATCH"`) &&
			strings.Contains(line, `resource="`+resource+`"`) {
			v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			if err != nil {
				return 0, err
			}
			n += int(v)
		}
	}
	return n, nil
}

// sharerCRD is the CRD of TestInformersAreShared's parents.
func sharerCRD() *unstructured.Unstructured {
	return crd("sharing.e2e.universalcontroller.dev", "sharers", "Sharer", true)
}

// TestInformersAreShared: five controllers with the same child kind open no
// more watches at the apiserver than one (uc run is one process).
func TestInformersAreShared(t *testing.T) {
	ctx := t.Context()
	// The garbage collector watches every resource, Sharers (created by
	// the suite's setup) too once its discovery found them: counted
	// before, its watch does not come and go during the measurement.
	eventually(t, 2*time.Minute, func() error {
		if n, err := watches(ctx, "sharers"); err != nil || n == 0 {
			return fmt.Errorf("the garbage collector does not watch sharers yet (%d watches, err %v)", n, err)
		}
		return nil
	})
	register := func(i int) {
		name := fmt.Sprintf("sharing-%d", i)
		uc := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "universalcontroller.dev/v1alpha1", "kind": "UniversalController",
			"metadata": map[string]any{"name": name},
			"spec": map[string]any{
				"parentResource": map[string]any{"apiVersion": "sharing.e2e.universalcontroller.dev/v1", "resource": "sharers",
					"labelSelector": map[string]any{"matchLabels": map[string]any{"controller": name}}},
				"generateSelector": true,
				"childResources":   []any{map[string]any{"apiVersion": "v1", "resource": "secrets"}},
				"hooks":            map[string]any{"sync": map[string]any{}},
			},
		}}
		createClusterScoped(t, v1alpha1.Resource, uc)
		eventually(t, time.Minute, func() error { return controllerReady(ctx, name, "True", "running") })
	}
	count := func() (secrets, sharers int) {
		t.Helper()
		var err error
		if secrets, err = watches(ctx, "secrets"); err == nil {
			sharers, err = watches(ctx, "sharers")
		}
		if err != nil {
			t.Fatal(err)
		}
		return secrets, sharers
	}
	before, beforeParents := count()
	register(1)
	var one, oneParents int
	eventually(t, 30*time.Second, func() error {
		if one, oneParents = count(); one <= before || oneParents <= beforeParents {
			return fmt.Errorf("uc opened no watch on secrets (%d, %d before) or sharers (%d, %d before) yet", one, before, oneParents, beforeParents)
		}
		return nil
	})
	for i := 2; i <= 5; i++ {
		register(i)
	}
	five, fiveParents := count()
	t.Logf("watches at the apiserver: secrets %d before, %d with 1 controller, %d with 5; sharers %d before, %d with 1, %d with 5",
		before, one, five, beforeParents, oneParents, fiveParents)
	if five != one || fiveParents != oneParents {
		t.Fatalf("5 controllers opened more watches than 1: secrets %d vs %d, sharers %d vs %d", five, one, fiveParents, oneParents)
	}
}
