package testbed

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// NodeName is the name of the test bed's only node, simulated by kwok. It
// carries the label type=kwok and no taints.
const NodeName = "kwok-node-0"

// kwokAnnotation marks the nodes kwok manages.
const kwokAnnotation = "kwok.x-k8s.io/node"

// startNode starts kwok, registers the node and waits until pods can be
// scheduled onto it and admitted in namespace default.
func (b *Bed) startNode(ctx context.Context) error {
	kwok, err := b.startKwok()
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(b.restConfig)
	if err != nil {
		return fmt.Errorf("create client: %w", err)
	}
	if err := createNode(ctx, client); err != nil {
		return err
	}
	if err := b.waitFor(ctx, "node "+NodeName, nodeReady(client), kwok); err != nil {
		return err
	}
	if err := untaintNode(ctx, client); err != nil {
		return err
	}
	return b.waitFor(ctx, "default service account", defaultServiceAccount(client))
}

func (b *Bed) startKwok() (*Process, error) {
	args := []string{
		"--kubeconfig=" + b.kubeconfig,
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector=" + kwokAnnotation + "=fake",
		// Room for 65k pod IPs, outside the service range.
		"--cidr=10.0.0.0/16",
	}
	for _, s := range stages {
		args = append(args, "--config="+b.bins.stage(s))
	}
	own, err := b.writeOwnStages()
	if err != nil {
		return nil, err
	}
	return b.launch("kwok", append(args, own...)...)
}

// ownStages are kwok stages of the test bed's own, besides kwok's; each
// acts only on pods that ask for it (see the files).
//
//go:embed stages/*.yaml
var ownStages embed.FS

// writeOwnStages writes ownStages into the work directory and returns
// kwok's flags to load them.
func (b *Bed) writeOwnStages() ([]string, error) {
	files, _ := ownStages.ReadDir("stages")
	var args []string
	for _, f := range files {
		data, _ := ownStages.ReadFile("stages/" + f.Name())
		path := filepath.Join(b.dir, "stage-"+f.Name())
		if err := os.WriteFile(path, data, 0o644); err != nil {
			return nil, fmt.Errorf("write kwok stage: %w", err)
		}
		args = append(args, "--config="+path)
	}
	return args, nil
}

// createNode registers the kwok node, large enough for any benchmark. An
// existing node (from a reused work dir) is kept.
func createNode(ctx context.Context, client kubernetes.Interface) error {
	resources := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("1000"),
		corev1.ResourceMemory: resource.MustParse("1Ti"),
		corev1.ResourcePods:   resource.MustParse("10000"),
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        NodeName,
			Annotations: map[string]string{kwokAnnotation: "fake"},
			Labels: map[string]string{
				"type":                   "kwok",
				"kubernetes.io/hostname": NodeName,
				"kubernetes.io/os":       "linux",
			},
		},
		Status: corev1.NodeStatus{Capacity: resources, Allocatable: resources},
	}
	_, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create node %s: %w", NodeName, err)
	}
	return nil
}

// nodeReady checks that kwok reports the node Ready.
func nodeReady(client kubernetes.Interface) func(context.Context) error {
	return func(ctx context.Context) error {
		node, err := client.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				return nil
			}
		}
		return errors.New("node not Ready yet")
	}
}

// untaintNode removes the not-ready taint that the API server puts on new
// nodes; without a node-lifecycle controller nothing else would.
func untaintNode(ctx context.Context, client kubernetes.Interface) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := client.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		taints := slices.DeleteFunc(slices.Clone(node.Spec.Taints), func(t corev1.Taint) bool {
			return t.Key == corev1.TaintNodeNotReady
		})
		if len(taints) == len(node.Spec.Taints) {
			return nil
		}
		node.Spec.Taints = taints
		_, err = client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("remove not-ready taint from node %s: %w", NodeName, err)
	}
	return nil
}

// defaultServiceAccount checks that the service-account controller created
// namespace default's ServiceAccount, which pods there need.
func defaultServiceAccount(client kubernetes.Interface) func(context.Context) error {
	return func(ctx context.Context) error {
		_, err := client.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
		return err
	}
}
