// Package helmchart tests deploy/helm/uc, uc's Helm chart: it is lint
// clean, its defaults render the objects of the kustomize install in
// deploy/, its values do what they say, and a real API server accepts what
// it renders. Render and DryRunner are also test/release's, for the
// packaged chart. The Helm library is used in tests and the release tool
// (internal/release) only: the uc binary does not depend on it.
package helmchart

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"universalcontroller.dev/uc/test/manifests"
)

// Render renders ch with vals over its defaults, as `helm template
// --include-crds` does (the templates without NOTES.txt, and crds/), as
// an install into namespace; or, with cluster, as an upgrade whose lookup
// functions ask cluster, as `helm upgrade` has them ask the release's
// cluster.
func Render(ch *chart.Chart, releaseName, namespace string, vals map[string]any, cluster engine.ClientProvider) (manifests.Set, error) {
	opts := chartutil.ReleaseOptions{Name: releaseName, Namespace: namespace, Revision: 1, IsInstall: true}
	if cluster != nil {
		opts = chartutil.ReleaseOptions{Name: releaseName, Namespace: namespace, Revision: 2, IsUpgrade: true}
	}
	top, err := chartutil.ToRenderValues(ch, vals, opts, chartutil.DefaultCapabilities)
	if err != nil {
		return nil, fmt.Errorf("values: %w", err)
	}
	var files map[string]string
	if cluster != nil {
		files, err = engine.RenderWithClientProvider(ch, top, cluster)
	} else {
		files, err = engine.Render(ch, top)
	}
	if err != nil {
		return nil, fmt.Errorf("render: %w", err)
	}
	var out manifests.Set
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if base := path.Base(name); base == "NOTES.txt" || strings.HasPrefix(base, "_") {
			continue
		}
		objs, err := manifests.Decode([]byte(files[name]))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out = append(out, objs...)
	}
	for _, crd := range ch.CRDObjects() {
		objs, err := manifests.Decode(crd.File.Data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", crd.Filename, err)
		}
		out = append(out, objs...)
	}
	return out, nil
}

// DryRunner applies objects of any kind server-side as a dry run.
type DryRunner struct {
	dyn    dynamic.Interface
	mapper meta.RESTMapper
}

// NewDryRunner makes a DryRunner on the API server of cfg.
func NewDryRunner(cfg *rest.Config) (*DryRunner, error) {
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("dynamic client: %w", err)
	}
	return &DryRunner{dyn: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(kube.Discovery()))}, nil
}

// DryRun applies o server-side, with strict field validation, as a dry
// run: the API server validates it and persists nothing.
func (a *DryRunner) DryRun(ctx context.Context, o *unstructured.Unstructured) error {
	gvk := o.GroupVersionKind()
	mapping, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return fmt.Errorf("resource of %s: %w", gvk, err)
	}
	var res dynamic.ResourceInterface = a.dyn.Resource(mapping.Resource)
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		res = a.dyn.Resource(mapping.Resource).Namespace(o.GetNamespace())
	}
	data, err := json.Marshal(o.Object)
	if err != nil {
		return err
	}
	force := true
	_, err = res.Patch(ctx, o.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{
		DryRun:          []string{metav1.DryRunAll},
		FieldManager:    "uc-helm-chart-test",
		FieldValidation: metav1.FieldValidationStrict,
		Force:           &force,
	})
	return err
}
