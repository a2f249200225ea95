package bluegreen

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"universalcontroller.dev/uc/examples/internal/exampletest"
	"universalcontroller.dev/uc/sdk/go/hook"
)

// template is a spec.template running image.
func template(image string) hook.Object {
	return hook.Object{
		"metadata": map[string]any{"labels": map[string]any{"app": "web"}},
		"spec":     map[string]any{"containers": []any{map[string]any{"name": "web", "image": image, "ports": []any{map[string]any{"name": "http", "containerPort": int64(80)}}}}},
	}
}

func hashOf(t *testing.T, image string) string {
	t.Helper()
	h, err := templateHash(template(image))
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// observedRS is a color's ReplicaSet as observed: the image it runs, its
// spec.replicas, and how many Pods exist and are available.
type observedRS struct {
	image                 string
	replicas, pods, avail int32
	// stale: its controller has not seen its latest spec yet.
	stale bool
}

// request is a sync request for the BlueGreenDeployment "web" with 2
// replicas of image, its observed ReplicaSets by color and the color its
// Service selects ("" for no Service).
func request(t *testing.T, image string, sets map[string]observedRS, serving string) *hook.SyncRequest {
	t.Helper()
	req := &hook.SyncRequest{
		Parent: hook.Object{
			"apiVersion": "examples.universalcontroller.dev/v1alpha1", "kind": "BlueGreenDeployment",
			"metadata": map[string]any{"name": "web", "namespace": "ns"},
			"spec": map[string]any{"replicas": int64(2), "selector": map[string]any{"matchLabels": map[string]any{"app": "web"}},
				"template": template(image)},
		},
		Children: hook.GroupedObjects{"ReplicaSet.apps/v1": {}, "Service.v1": {}},
	}
	for color, o := range sets {
		rs := appsv1.ReplicaSet{}
		rs.Name, rs.Generation = ReplicaSetName("web", color), 3
		rs.Annotations = map[string]string{AnnotationTemplateHash: hashOf(t, o.image)}
		rs.Spec.Replicas = &o.replicas
		tmpl, err := hook.Decode[corev1.PodTemplateSpec](template(o.image))
		if err != nil {
			t.Fatal(err)
		}
		rs.Spec.Template = tmpl
		rs.Status = appsv1.ReplicaSetStatus{Replicas: o.pods, AvailableReplicas: o.avail, ObservedGeneration: 3}
		if o.stale {
			rs.Status.ObservedGeneration = 2
		}
		obj, err := hook.ObjectOf(&rs)
		if err != nil {
			t.Fatal(err)
		}
		req.Children["ReplicaSet.apps/v1"][rs.Name] = obj
	}
	if serving != "" {
		req.Children["Service.v1"]["web"] = hook.Object{
			"metadata": map[string]any{"name": "web"},
			"spec":     map[string]any{"selector": map[string]any{"app": "web", LabelColor: serving}},
		}
	}
	return req
}

// wantRS is a desired ReplicaSet: its image and replicas.
type wantRS struct {
	image    string
	replicas int32
}

func TestSync(t *testing.T) {
	for _, tc := range []struct {
		name    string
		image   string
		sets    map[string]observedRS
		serving string
		want    map[string]wantRS
		// wantServing is the color the Service is to select, "" for none.
		wantServing string
	}{{
		name:  "a new deployment starts blue, without a Service",
		image: "v1",
		want:  map[string]wantRS{Blue: {"v1", 2}, Green: {"v1", 0}},
	}, {
		name:  "blue not yet available: still no Service",
		image: "v1",
		sets:  map[string]observedRS{Blue: {"v1", 2, 2, 1, false}, Green: {"v1", 0, 0, 0, false}},
		want:  map[string]wantRS{Blue: {"v1", 2}, Green: {"v1", 0}},
	}, {
		name:        "blue available: the Service appears on blue",
		image:       "v1",
		sets:        map[string]observedRS{Blue: {"v1", 2, 2, 2, false}, Green: {"v1", 0, 0, 0, false}},
		want:        map[string]wantRS{Blue: {"v1", 2}, Green: {"v1", 0}},
		wantServing: Blue,
	}, {
		name:        "a new template goes to green; blue keeps serving",
		image:       "v2",
		sets:        map[string]observedRS{Blue: {"v1", 2, 2, 2, false}, Green: {"v1", 0, 0, 0, false}},
		serving:     Blue,
		want:        map[string]wantRS{Blue: {"v1", 2}, Green: {"v2", 2}},
		wantServing: Blue,
	}, {
		name:        "green available but its controller is behind: no switch",
		image:       "v2",
		sets:        map[string]observedRS{Blue: {"v1", 2, 2, 2, false}, Green: {"v2", 2, 2, 2, true}},
		serving:     Blue,
		want:        map[string]wantRS{Blue: {"v1", 2}, Green: {"v2", 2}},
		wantServing: Blue,
	}, {
		name:        "green fully available: the Service switches, blue still runs",
		image:       "v2",
		sets:        map[string]observedRS{Blue: {"v1", 2, 2, 2, false}, Green: {"v2", 2, 2, 2, false}},
		serving:     Blue,
		want:        map[string]wantRS{Blue: {"v1", 2}, Green: {"v2", 2}},
		wantServing: Green,
	}, {
		name:        "the Service on green: blue goes to zero, keeping its template",
		image:       "v2",
		sets:        map[string]observedRS{Blue: {"v1", 2, 2, 2, false}, Green: {"v2", 2, 2, 2, false}},
		serving:     Green,
		want:        map[string]wantRS{Blue: {"v1", 0}, Green: {"v2", 2}},
		wantServing: Green,
	}, {
		name:        "the next template waits for blue to drain",
		image:       "v3",
		sets:        map[string]observedRS{Blue: {"v1", 0, 1, 1, false}, Green: {"v2", 2, 2, 2, false}},
		serving:     Green,
		want:        map[string]wantRS{Blue: {"v1", 0}, Green: {"v2", 2}},
		wantServing: Green,
	}, {
		name:        "blue drained: it gets the next template",
		image:       "v3",
		sets:        map[string]observedRS{Blue: {"v1", 0, 0, 0, false}, Green: {"v2", 2, 2, 2, false}},
		serving:     Green,
		want:        map[string]wantRS{Blue: {"v3", 2}, Green: {"v2", 2}},
		wantServing: Green,
	}, {
		name:        "back to the active template before the switch: the rollout stops",
		image:       "v2",
		sets:        map[string]observedRS{Blue: {"v3", 2, 2, 1, false}, Green: {"v2", 2, 2, 2, false}},
		serving:     Green,
		want:        map[string]wantRS{Blue: {"v3", 0}, Green: {"v2", 2}},
		wantServing: Green,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := Sync(t.Context(), request(t, tc.image, tc.sets, tc.serving))
			if err != nil {
				t.Fatal(err)
			}
			serving := ""
			for _, c := range resp.Children {
				switch c := c.(type) {
				case *appsv1.ReplicaSet:
					rs := c
					color := rs.Labels[LabelColor]
					got := wantRS{rs.Spec.Template.Spec.Containers[0].Image, *rs.Spec.Replicas}
					if got != tc.want[color] {
						t.Errorf("%s: %+v, want %+v", rs.Name, got, tc.want[color])
					}
					if rs.Annotations[AnnotationTemplateHash] != hashOf(t, got.image) || rs.Spec.Selector.MatchLabels[LabelColor] != color ||
						rs.Spec.Template.Labels[LabelColor] != color {
						t.Errorf("%s: annotations %v, selector %v, template labels %v", rs.Name, rs.Annotations, rs.Spec.Selector, rs.Spec.Template.Labels)
					}
				case *corev1.Service:
					serving = c.Spec.Selector[LabelColor]
				default:
					t.Errorf("a child of type %T", c)
				}
			}
			if serving != tc.wantServing || resp.Status["activeColor"] != tc.wantServing {
				t.Errorf("the Service selects %q, status.activeColor %v; want %q", serving, resp.Status["activeColor"], tc.wantServing)
			}
		})
	}
}

func TestManifests(t *testing.T) {
	crd, uc := exampletest.Manifests(t, CRD, ControllerManifest)
	exampletest.DefinesGVR(t, crd, GVR)
	if uc.Name != Controller || len(uc.Spec.ChildResources) != 2 || uc.Spec.GenerateSelector != nil {
		t.Errorf("controller.yaml registers %s with %+v", uc.Name, uc.Spec)
	}
}
