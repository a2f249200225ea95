// Package crds holds uc's CustomResourceDefinition manifests, generated from
// the Go types in schemas/v1alpha1 by controller-gen (go generate
// ./schemas/...), and installs them into a cluster.
package crds

import (
	"context"
	"embed"
	"fmt"
	"maps"
	"path"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apiextensionsclientv1 "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/typed/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/yaml"
)

// files holds the manifests, one CustomResourceDefinition per file.
//
//go:embed *.yaml
var files embed.FS

// establishTimeout bounds how long Install waits for each
// CustomResourceDefinition to become Established.
const establishTimeout = time.Minute

// establishPoll is how often Install checks the Established condition.
const establishPoll = 100 * time.Millisecond

// All decodes the embedded manifests, in file name order. Each call returns
// fresh objects the caller may modify.
func All() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	entries, err := files.ReadDir(".")
	if err != nil {
		return nil, err
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, e := range entries {
		if e.IsDir() || path.Ext(e.Name()) != ".yaml" {
			continue
		}
		data, err := files.ReadFile(e.Name())
		if err != nil {
			return nil, err
		}
		crd := new(apiextensionsv1.CustomResourceDefinition)
		if err := yaml.UnmarshalStrict(data, crd); err != nil {
			return nil, fmt.Errorf("crds: decoding %s: %w", e.Name(), err)
		}
		if crd.APIVersion != apiextensionsv1.SchemeGroupVersion.String() || crd.Kind != "CustomResourceDefinition" || crd.Name == "" {
			return nil, fmt.Errorf("crds: %s is not a named %s CustomResourceDefinition (apiVersion %q, kind %q, name %q)",
				e.Name(), apiextensionsv1.SchemeGroupVersion, crd.APIVersion, crd.Kind, crd.Name)
		}
		crds = append(crds, crd)
	}
	if len(crds) == 0 {
		return nil, fmt.Errorf("crds: no manifests embedded")
	}
	return crds, nil
}

// Install creates the CustomResourceDefinitions, or updates those that exist
// to the embedded spec, then waits until each is Established: at most
// a minute per definition, and no longer than ctx allows.
func Install(ctx context.Context, cfg *rest.Config) error {
	crds, err := All()
	if err != nil {
		return err
	}
	return InstallDefinitions(ctx, cfg, crds...)
}

// InstallDefinitions creates or updates CustomResourceDefinitions, uc's or
// others' (a test's), and waits until each is Established, as Install.
func InstallDefinitions(ctx context.Context, cfg *rest.Config, crds ...*apiextensionsv1.CustomResourceDefinition) error {
	cs, err := clientset.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("crds: %w", err)
	}
	client := cs.ApiextensionsV1().CustomResourceDefinitions()
	for _, crd := range crds {
		if err := createOrUpdate(ctx, client, crd); err != nil {
			return fmt.Errorf("crds: installing %s: %w", crd.Name, err)
		}
	}
	for _, crd := range crds {
		if err := waitEstablished(ctx, client, crd.Name); err != nil {
			return fmt.Errorf("crds: waiting for %s to be established: %w", crd.Name, err)
		}
	}
	return nil
}

func createOrUpdate(ctx context.Context, client apiextensionsclientv1.CustomResourceDefinitionInterface, want *apiextensionsv1.CustomResourceDefinition) error {
	_, err := client.Create(ctx, want, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		have, err := client.Get(ctx, want.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		have.Spec = want.Spec
		have.Labels = merge(have.Labels, want.Labels)
		have.Annotations = merge(have.Annotations, want.Annotations)
		_, err = client.Update(ctx, have, metav1.UpdateOptions{})
		return err
	})
}

// merge returns dst with the entries of src added or overwritten.
func merge(dst, src map[string]string) map[string]string {
	if len(src) == 0 {
		return dst
	}
	if dst == nil {
		dst = make(map[string]string, len(src))
	}
	maps.Copy(dst, src)
	return dst
}

func waitEstablished(ctx context.Context, client apiextensionsclientv1.CustomResourceDefinitionInterface, name string) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, establishPoll, establishTimeout, true, func(ctx context.Context) (bool, error) {
		crd, err := client.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		for _, c := range crd.Status.Conditions {
			switch {
			case c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue:
				return true, nil
			case c.Type == apiextensionsv1.NamesAccepted && c.Status == apiextensionsv1.ConditionFalse:
				return false, fmt.Errorf("names not accepted: %s: %s", c.Reason, c.Message)
			}
		}
		last = "not Established yet"
		return false, nil
	})
	if err != nil && last != "" && wait.Interrupted(err) {
		return fmt.Errorf("%w (last: %s)", err, last)
	}
	return err
}
