package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"

	"universalcontroller.dev/uc/sdk/go/hook"
)

// maxServiceUIDs bounds the Services a parent of TestRecreateLoopStops
// sees made for one desired state: the first, and the few re-creations uc
// makes before it gives up on a difference the apiserver puts back.
const maxServiceUIDs = 4

// TestRecreateLoopStops: a Go hook returns a typed *corev1.Service child
// with targetPort 0 (the typed struct encodes it), updated by Recreate; the
// apiserver defaults targetPort to 80, so the live Service never holds the
// desired one. uc re-creates it a bounded number of times, then leaves it
// as it is and says so — a Warning Event RecreateLoop naming the Service
// and the field, and Synced=False — while the parent's ConfigMap child is
// applied as usual. A new desired state (targetPort 80) is applied again:
// the Service is re-created once and stays.
func TestRecreateLoopStops(t *testing.T) {
	ctx := t.Context()
	const ctl = "e2e-recreate-loop"
	registerCompositeWith(t, ctl, hook.Sync(serviceHook), func(spec map[string]any) {
		spec["childResources"] = []any{
			map[string]any{"apiVersion": "v1", "resource": "configmaps", "updateStrategy": map[string]any{"method": "InPlace"}},
			map[string]any{"apiVersion": "v1", "resource": "services", "updateStrategy": map[string]any{"method": "Recreate"}},
		}
	})
	ns := namespace(t)
	uids := watchUIDs(t, ns, "svc")
	parent := createComposite(t, ns, "p", ctl, map[string]any{"selector": selectApp("p")})

	tooMany := func() error {
		if n := uids.count(); n > maxServiceUIDs {
			return backoffStop{fmt.Errorf("the Service was made %d times for one desired state, want at most %d", n, maxServiceUIDs)}
		}
		return nil
	}
	eventually(t, 2*time.Minute, func() error {
		if err := tooMany(); err != nil {
			return err
		}
		if err := warningEvent(ctx, ns, "p", "RecreateLoop", "svc"); err != nil {
			return err
		}
		if err := warningEvent(ctx, ns, "p", "RecreateLoop", "spec.ports[0].targetPort"); err != nil {
			return err
		}
		p, err := getComposite(ctx, ns, "p")
		if err != nil {
			return err
		}
		if c := condition(p, "Synced"); c["status"] != "False" || c["reason"] != "RecreateLoop" || !strings.Contains(fmt.Sprint(c["message"]), "svc") {
			return fmt.Errorf("Synced condition is %v", c)
		}
		c, err := getConfigMap(ctx, ns, "cfg")
		if err != nil {
			return err
		}
		return controlledBy(c, parent.GetUID())
	})
	t.Logf("the Service was made %d times", uids.count())
	// Given up on, the Service stays as it is.
	consistently(t, 10*time.Second, func() error {
		if err := tooMany(); err != nil {
			return err
		}
		_, err := env.kube.CoreV1().Services(ns).Get(ctx, "svc", metav1.GetOptions{})
		return err
	})
	before := uids.count()

	// A new desired state the apiserver keeps is applied: once.
	patchComposite(t, ns, "p", map[string]any{"spec": map[string]any{"targetPort": 80}})
	eventually(t, time.Minute, func() error {
		s, err := env.kube.CoreV1().Services(ns).Get(ctx, "svc", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got := s.Spec.Ports[0].TargetPort.IntValue(); got != 80 || uids.count() != before+1 {
			return fmt.Errorf("targetPort %d after %d Services, want 80 after %d", got, uids.count(), before+1)
		}
		return compositeSynced(ctx, ns, "p")
	})
	consistently(t, 5*time.Second, func() error {
		if n := uids.count(); n != before+1 {
			return fmt.Errorf("the Service was made again: %d times, want %d", n, before+1)
		}
		return nil
	})
}

// serviceHook replies a ConfigMap cfg and a typed Service svc whose
// targetPort is the parent's spec.targetPort (0 when unset).
func serviceHook(_ context.Context, req *hook.SyncRequest) (*hook.SyncResponse, error) {
	spec, _ := req.Parent["spec"].(map[string]any)
	port, _ := spec["targetPort"].(float64)
	labels := map[string]string{"app": "p"}
	svc := &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: "svc", Labels: labels},
		Spec: corev1.ServiceSpec{
			Selector: labels,
			Ports:    []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(int32(port))}},
		},
	}
	return &hook.SyncResponse{Children: []any{cm("cfg", map[string]any{"app": "p"}, map[string]any{"k": "v"}), svc}}, nil
}

// uidSet holds the UIDs of the objects a watch saw added.
type uidSet struct {
	mu   sync.Mutex
	seen map[types.UID]bool
}

func (s *uidSet) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.seen)
}

// watchUIDs records the UIDs of the Services named name in ns until the
// test ends.
func watchUIDs(t *testing.T, ns, name string) *uidSet {
	t.Helper()
	w, err := env.kube.CoreV1().Services(ns).Watch(t.Context(), metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	s := &uidSet{seen: map[types.UID]bool{}}
	go func() {
		for e := range w.ResultChan() {
			if o, ok := e.Object.(*corev1.Service); ok && e.Type == watch.Added {
				s.mu.Lock()
				s.seen[o.UID] = true
				s.mu.Unlock()
			}
		}
	}()
	return s
}
