package testbed_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"universalcontroller.dev/uc/test/testbed"
)

// eventually polls cond until it reports true, failing t after timeout.
func eventually(t *testing.T, what string, timeout time.Duration, cond func(context.Context) (bool, error)) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, timeout, true, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

func TestBed(t *testing.T) {
	begin := time.Now()
	bed := testbed.New(t)
	t.Logf("Start took %s", time.Since(begin).Round(time.Millisecond))

	client := kubernetes.NewForConfigOrDie(bed.RESTConfig())
	t.Run("kubeconfig", func(t *testing.T) { testKubeconfig(t, bed) })
	t.Run("metrics", func(t *testing.T) { testMetrics(t, client) })
	t.Run("deployment", func(t *testing.T) { testDeployment(t, client) })
}

func testKubeconfig(t *testing.T, bed *testbed.Bed) {
	config, err := clientcmd.BuildConfigFromFlags("", bed.Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	if config.Host != bed.APIServerURL() {
		t.Errorf("kubeconfig server = %s, want %s", config.Host, bed.APIServerURL())
	}
	node, err := kubernetes.NewForConfigOrDie(config).CoreV1().Nodes().Get(t.Context(), testbed.NodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(node.Spec.Taints) != 0 {
		t.Errorf("node taints = %v, want none", node.Spec.Taints)
	}
}

func testMetrics(t *testing.T, client kubernetes.Interface) {
	body, err := client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(body), "apiserver_request_total") {
		t.Error("apiserver /metrics lacks apiserver_request_total")
	}
}

func testDeployment(t *testing.T, client kubernetes.Interface) {
	ctx := t.Context()
	deployments := client.AppsV1().Deployments(metav1.NamespaceDefault)
	pods := client.CoreV1().Pods(metav1.NamespaceDefault)
	labels := map[string]string{"app": "web"}

	begin := time.Now()
	_, err := deployments.Create(ctx, newDeployment("web", labels, 2), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "2 available replicas", time.Minute, func(ctx context.Context) (bool, error) {
		d, err := deployments.Get(ctx, "web", metav1.GetOptions{})
		return err == nil && d.Status.AvailableReplicas == 2, err
	})
	t.Logf("2 pods available %s after creating the deployment", time.Since(begin).Round(time.Millisecond))
	list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 2 {
		t.Fatalf("%d pods, want 2", len(list.Items))
	}

	begin = time.Now()
	if err := deployments.Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "pods to be garbage collected", time.Minute, func(ctx context.Context) (bool, error) {
		list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		return err == nil && len(list.Items) == 0, err
	})
	t.Logf("pods gone %s after deleting the deployment", time.Since(begin).Round(time.Millisecond))
}

func newDeployment(name string, labels map[string]string, replicas int32) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{"type": "kwok"},
					Containers:   []corev1.Container{{Name: "web", Image: "registry.example/nginx"}},
				},
			},
		},
	}
}

func TestNATSKillRestart(t *testing.T) {
	ctx := t.Context()
	srv, err := testbed.StartNATS(ctx, t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)

	const stream, messages = "EVENTS", 3
	js := connectJetStream(t, srv.URL())
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{
		Name:     stream,
		Subjects: []string{"events.>"},
		Storage:  jetstream.FileStorage,
	})
	if err != nil {
		t.Fatal(err)
	}
	for range messages {
		if _, err := js.Publish(ctx, "events.test", []byte("hello")); err != nil {
			t.Fatal(err)
		}
	}

	url := srv.URL()
	srv.Kill()
	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if srv.URL() != url {
		t.Fatalf("URL after restart = %s, want %s", srv.URL(), url)
	}

	s, err := connectJetStream(t, srv.URL()).Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != messages {
		t.Errorf("stream holds %d messages after restart, want %d", info.State.Msgs, messages)
	}
}

func connectJetStream(t *testing.T, url string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}
