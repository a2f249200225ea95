package e2e

// The CatSet example (thesis use case 3): ordinal Pods and PVCs, scaling in
// order, and a RollingRecreate rollout through ControllerRevisions that
// resumes where it stopped after uc is killed.

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"universalcontroller.dev/uc/examples/catset"
	"universalcontroller.dev/uc/schemas/v1alpha1"
	"universalcontroller.dev/uc/sdk/go/hook"
)

// podTracker follows a namespace's Pods: which are available, in which
// order Pods appeared with a given image and were deleted, and the most Pods
// unavailable at once while tracking.
type podTracker struct {
	mu          sync.Mutex
	pods        map[string]*corev1.Pod // live, by name
	uids        map[string][]string    // every UID seen per name
	deleted     []string               // names, in the order they went
	firstWith   map[string][]string    // by image: names in the order they first ran it
	want        []string               // the Pods that should be available
	unavailable int                    // the most of want unavailable at once
	onDelete    func(name string)
}

func trackPods(t *testing.T, ns string) *podTracker {
	tr := &podTracker{pods: map[string]*corev1.Pod{}, uids: map[string][]string{}, firstWith: map[string][]string{}}
	factory := informers.NewSharedInformerFactoryWithOptions(env.kube, 0, informers.WithNamespace(ns))
	inf := factory.Core().V1().Pods().Informer()
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { tr.set(obj.(*corev1.Pod)) },
		UpdateFunc: func(_, obj any) { tr.set(obj.(*corev1.Pod)) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			tr.remove(obj.(*corev1.Pod))
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(t.Context().Done())
	factory.WaitForCacheSync(t.Context().Done())
	return tr
}

func podReady(p *corev1.Pod) bool {
	if p == nil || p.DeletionTimestamp != nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func (tr *podTracker) set(p *corev1.Pod) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.pods[p.Name] = p
	if !slices.Contains(tr.uids[p.Name], string(p.UID)) {
		tr.uids[p.Name] = append(tr.uids[p.Name], string(p.UID))
	}
	image := p.Spec.Containers[0].Image
	if !slices.Contains(tr.firstWith[image], p.Name) {
		tr.firstWith[image] = append(tr.firstWith[image], p.Name)
	}
	tr.check()
}

func (tr *podTracker) remove(p *corev1.Pod) {
	tr.mu.Lock()
	delete(tr.pods, p.Name)
	tr.deleted = append(tr.deleted, p.Name)
	tr.check()
	onDelete := tr.onDelete
	tr.mu.Unlock()
	if onDelete != nil {
		onDelete(p.Name)
	}
}

// check records how many of the wanted Pods are unavailable now.
func (tr *podTracker) check() {
	n := 0
	for _, name := range tr.want {
		if !podReady(tr.pods[name]) {
			n++
		}
	}
	tr.unavailable = max(tr.unavailable, n)
}

// expect starts counting unavailable Pods among names.
func (tr *podTracker) expect(names ...string) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.want, tr.unavailable, tr.deleted = names, 0, nil
	tr.check()
}

// ready fails unless exactly the named Pods exist, Ready, running image.
func (tr *podTracker) ready(image string, names ...string) error {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	var live []string
	for name, p := range tr.pods {
		live = append(live, name)
		if !podReady(p) || p.Spec.Containers[0].Image != image {
			return fmt.Errorf("pod %s: ready %v, image %s; want ready with %s", name, podReady(p), p.Spec.Containers[0].Image, image)
		}
	}
	slices.Sort(live)
	if !slices.Equal(live, names) {
		return fmt.Errorf("pods %v, want %v", live, names)
	}
	return nil
}

// order lists the Pods in the order they first ran image.
func (tr *podTracker) order(image string) []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return slices.Clone(tr.firstWith[image])
}

func (tr *podTracker) snapshot() (deleted []string, unavailable int) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return slices.Clone(tr.deleted), tr.unavailable
}

// createVolumes makes n PersistentVolumes of the catset storage class for
// the CatSet's claims (the test bed has no provisioner).
func createVolumes(t *testing.T, ns string, n int) {
	for i := range n {
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", ns, i)},
			Spec: corev1.PersistentVolumeSpec{
				StorageClassName: "catset",
				AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Capacity:         corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
				PersistentVolumeSource: corev1.PersistentVolumeSource{
					HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/" + ns},
				},
			},
		}
		if _, err := env.kube.CoreV1().PersistentVolumes().Create(t.Context(), pv, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = env.kube.CoreV1().PersistentVolumes().Delete(context.Background(), pv.Name, metav1.DeleteOptions{})
		})
	}
}

func scaleCatSet(t *testing.T, ns string, replicas int) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas)
	if _, err := env.dyn.Resource(catset.GVR).Namespace(ns).Patch(t.Context(), "web", "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

func pvcUIDs(ctx context.Context, ns string) (map[string]string, error) {
	list, err := env.kube.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, pvc := range list.Items {
		out[pvc.Name] = string(pvc.UID)
	}
	return out, nil
}

// catsetUpdated fails unless the CatSet's Updated condition has reason.
func catsetUpdated(ctx context.Context, ns, reason string) error {
	p, err := env.dyn.Resource(catset.GVR).Namespace(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		return err
	}
	if c := condition(p, v1alpha1.ConditionUpdated); c == nil || c["reason"] != reason {
		return fmt.Errorf("Updated condition %v, want reason %s", c, reason)
	}
	return nil
}

func TestExampleCatSet(t *testing.T) {
	ctx := t.Context()
	ns := namespace(t)
	logEventsOnFailure(t, ns)
	installExample(t, "examples/catset", catset.GVR, catset.Controller, nil, hook.Sync(catset.Sync), hook.Finalize(catset.Finalize))
	logHookSize(t, "CatSet", "examples/catset")
	createVolumes(t, ns, 5)
	tr := trackPods(t, ns)

	cs := manifestObject(t, "examples/catset/catset.yaml")
	cs.SetName("web")
	if _, err := env.dyn.Resource(catset.GVR).Namespace(ns).Create(ctx, cs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const v1, v2 = "nginx:1.27", "nginx:1.28"
	if !t.Run("pods come up in order", func(t *testing.T) {
		eventually(t, 2*time.Minute, func() error { return tr.ready(v1, "web-0", "web-1", "web-2") })
		if got := tr.order(v1); !slices.Equal(got, []string{"web-0", "web-1", "web-2"}) {
			t.Errorf("pods came up in the order %v, want web-0, web-1, web-2", got)
		}
	}) {
		return
	}

	if !t.Run("scale 3 → 4 → 2 → 3, keeping the claims", func(t *testing.T) {
		scaleCatSet(t, ns, 4)
		eventually(t, time.Minute, func() error { return tr.ready(v1, "web-0", "web-1", "web-2", "web-3") })
		claims, err := pvcUIDs(ctx, ns)
		if err != nil {
			t.Fatal(err)
		}
		tr.expect("web-0", "web-1")
		scaleCatSet(t, ns, 2)
		eventually(t, time.Minute, func() error { return tr.ready(v1, "web-0", "web-1") })
		if deleted, _ := tr.snapshot(); !slices.Equal(deleted, []string{"web-3", "web-2"}) {
			t.Errorf("scale-down deleted %v, want web-3 then web-2", deleted)
		}
		kept, err := pvcUIDs(ctx, ns)
		if err != nil {
			t.Fatal(err)
		}
		if len(claims) != 4 || !maps.Equal(kept, claims) {
			t.Errorf("claims after the scale-down %v, want the 4 claims of before %v", kept, claims)
		}
		scaleCatSet(t, ns, 3)
		eventually(t, time.Minute, func() error { return tr.ready(v1, "web-0", "web-1", "web-2") })
		eventually(t, 30*time.Second, func() error { return catsetUpdated(ctx, ns, "OnLatestRevision") })
	}) {
		return
	}

	if !t.Run("roll out a new pod template, uc killed after the first pod is deleted", func(t *testing.T) {
		killed := make(chan struct{})
		var once sync.Once
		tr.mu.Lock()
		tr.onDelete = func(string) { once.Do(func() { close(killed) }) }
		tr.mu.Unlock()
		tr.expect("web-0", "web-1", "web-2")
		patch := fmt.Sprintf(`{"spec":{"template":{"spec":{"containers":[{"name":"nginx","image":%q,"ports":[{"containerPort":80,"name":"web"}],"volumeMounts":[{"name":"www","mountPath":"/usr/share/nginx/html"}]}]}}}}`, v2)
		if _, err := env.dyn.Resource(catset.GVR).Namespace(ns).Patch(ctx, "web", "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		select {
		case <-killed:
		case <-time.After(time.Minute):
			t.Fatal("no pod was deleted within a minute of the template change")
		}
		env.uc.kill()
		t.Log("uc killed mid-rollout")
		if err := env.uc.start(ctx); err != nil {
			t.Fatal(err)
		}
		eventually(t, 3*time.Minute, func() error { return tr.ready(v2, "web-0", "web-1", "web-2") })
		eventually(t, 30*time.Second, func() error { return catsetUpdated(ctx, ns, "OnLatestRevision") })
		deleted, unavailable := tr.snapshot()
		t.Logf("rollout: pods deleted in the order %v; at most %d of 3 unavailable at once; pods with %s appeared in the order %v", deleted, unavailable, v2, tr.order(v2))
		if unavailable > 1 {
			t.Errorf("%d pods were unavailable at once during the rollout, want at most 1", unavailable)
		}
		if !slices.Equal(deleted, []string{"web-2", "web-1", "web-0"}) {
			t.Errorf("the rollout deleted %v, want each pod once, highest ordinal first", deleted)
		}
		revs, err := env.dyn.Resource(v1alpha1.RevisionResource).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(revs.Items) != 1 {
			t.Errorf("%d ControllerRevisions after the rollout, want 1 (the unused one collected)", len(revs.Items))
		}
	}) {
		return
	}

	t.Run("delete: the finalize hook scales it to zero first", func(t *testing.T) {
		tr.expect()
		if err := env.dyn.Resource(catset.GVR).Namespace(ns).Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 2*time.Minute, func() error {
			if _, err := env.dyn.Resource(catset.GVR).Namespace(ns).Get(ctx, "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("the CatSet is still there (err %v)", err)
			}
			return nil
		})
		if deleted, _ := tr.snapshot(); !slices.Equal(deleted, []string{"web-2", "web-1", "web-0"}) {
			t.Errorf("finalizing deleted %v, want web-2, web-1, web-0", deleted)
		}
		// The garbage collector takes the claims and the revisions.
		eventually(t, 2*time.Minute, func() error {
			pvcs, err := pvcUIDs(ctx, ns)
			if err != nil || len(pvcs) > 0 {
				return fmt.Errorf("claims left: %v (err %v)", pvcs, err)
			}
			revs, err := env.dyn.Resource(v1alpha1.RevisionResource).Namespace(ns).List(ctx, metav1.ListOptions{})
			if err != nil || len(revs.Items) > 0 {
				return fmt.Errorf("revisions left: %d (err %v)", len(revs.Items), err)
			}
			return nil
		})
	})
}

// logEventsOnFailure prints the namespace's Events when the test fails: what
// uc did to the children, in order.
func logEventsOnFailure(t *testing.T, ns string) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		list, err := env.kube.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Logf("list events: %v", err)
			return
		}
		slices.SortFunc(list.Items, func(a, b corev1.Event) int { return a.LastTimestamp.Compare(b.LastTimestamp.Time) })
		for _, e := range list.Items {
			t.Logf("event %s %s %s/%s: %s %s (x%d)", e.LastTimestamp.Format("15:04:05"), e.Type, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message, e.Count)
		}
	})
}
