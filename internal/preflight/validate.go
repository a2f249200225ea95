package preflight

import (
	"context"
	"encoding/base64"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/kube-openapi/pkg/validation/strfmt"
	"k8s.io/kube-openapi/pkg/validation/validate"
	"universalcontroller.dev/uc/core"
	"universalcontroller.dev/uc/internal/ujson"
)

// maxObjectBytes bounds the objects validated on the client: etcd refuses
// a larger value than 1.5 MiB by default.
const maxObjectBytes = 1 << 20

// schemas validates objects on the client as the apiserver validates them,
// for the kinds uc knows the validation of: ConfigMaps, whose rules are
// Kubernetes' own (k8s.io/kubernetes/pkg/apis/core/validation), and custom
// resources, whose rules are their CRD's schema, compiled once per version
// of it.
type schemas struct {
	crds CRDs

	mu       sync.Mutex
	compiled map[string]*customSchema // by CRD name and version
}

func newSchemas(crds CRDs) *schemas {
	return &schemas{crds: crds, compiled: map[string]*customSchema{}}
}

// couldRefuse tells why the apiserver could find the written object
// invalid, or "". Only what a write sets is judged: a release takes an
// ownerReference off, a delete sets nothing.
func (s *schemas) couldRefuse(ctx context.Context, w Write) string {
	switch {
	case w.New == nil:
		return ""
	case w.Verb == Apply && w.Old == nil:
		return "the live object it updates is not in the cache"
	}
	if hasNull(w.New.Object) {
		return fmt.Sprintf("%s is null", nullAt(w.New.Object, ""))
	}
	if n, err := ujson.Size(w.New.Object); err != nil || n > maxObjectBytes {
		return fmt.Sprintf("the object is larger than %d bytes", maxObjectBytes)
	}
	if w.Resource.GVK.GroupKind() == configMapKind {
		return problems(validateConfigMap(w.New, w.Old))
	}
	crd, err := s.crds.CustomResourceDefinition(ctx, w.Resource.GVR.GroupResource())
	switch {
	case err != nil:
		return fmt.Sprintf("its kind's schema is unknown: %v", err)
	case crd == nil:
		return fmt.Sprintf("uc does not know how the apiserver validates a %s", w.Resource.GVK.Kind)
	}
	return s.custom(crd, w.Resource.GVK.Version).couldRefuse(w)
}

func errorsOf(list field.ErrorList) []error {
	out := make([]error, len(list))
	for i, err := range list {
		out[i] = err
	}
	return out
}

// problems tells what is wrong, or "".
func problems(errs []error) string {
	msgs := make([]string, len(errs))
	for i, err := range errs {
		msgs[i] = err.Error()
	}
	return strings.Join(msgs, "; ")
}

// hasNull tells whether v holds a null value (see nullAt), without the
// cost of naming where: every write is checked.
func hasNull(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case map[string]any:
		for _, x := range v {
			if hasNull(x) {
				return true
			}
		}
	case []any:
		return slices.ContainsFunc(v, hasNull)
	}
	return false
}

// nullAt returns the path of a null value in v, or "": the apiserver
// prunes some and refuses others, and a server-side apply takes them to
// mean something else again.
func nullAt(v any, path string) string {
	switch v := v.(type) {
	case nil:
		return strings.TrimPrefix(path, ".")
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(v)) {
			if p := nullAt(v[k], path+"."+k); p != "" {
				return p
			}
		}
	case []any:
		for i, x := range v {
			if p := nullAt(x, path+"["+strconv.Itoa(i)+"]"); p != "" {
				return p
			}
		}
	}
	return ""
}

// validateMeta validates an object's metadata as the apiserver does for
// every kind: its name a DNS subdomain, its labels, annotations, owners and
// finalizers.
func validateMeta(m *metav1.ObjectMeta, namespaced bool) field.ErrorList {
	return apivalidation.ValidateObjectMeta(m, namespaced, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
}

var configMapKind = schema.GroupKind{Kind: "ConfigMap"}

// validateConfigMap validates a ConfigMap as Kubernetes does
// (ValidateConfigMap and ValidateConfigMapUpdate of
// k8s.io/kubernetes/pkg/apis/core/validation), after decoding it as the
// apiserver does: a field of the wrong type, or one a ConfigMap does not
// have, is refused. Applied over a live one (live non-nil), the ConfigMap
// the apiserver validates holds the live one's keys and annotations that
// the apply does not set, unless uc set them before: it is validated with
// all of them, which is as strict or stricter.
func validateConfigMap(obj, live *unstructured.Unstructured) []error {
	cm, err := decodeConfigMap(obj.Object)
	if err != nil {
		return []error{err}
	}
	if live != nil {
		old, err := liveConfigMap(live.Object)
		if err != nil {
			return []error{fmt.Errorf("the live ConfigMap: %w", err)}
		}
		if old.Immutable != nil && *old.Immutable {
			return []error{field.Forbidden(field.NewPath("immutable"), "the live ConfigMap is immutable")}
		}
		cm.Annotations = union(old.Annotations, cm.Annotations)
		cm.Data = union(old.Data, cm.Data)
		cm.BinaryData = union(old.BinaryData, cm.BinaryData)
	}
	errs := validateMeta(&cm.ObjectMeta, true)
	for i, f := range cm.Finalizers {
		// Built-in kinds also refuse a finalizer that is neither
		// qualified ("example.com/x") nor one of Kubernetes' own.
		if !strings.Contains(f, "/") && f != metav1.FinalizerOrphanDependents && f != metav1.FinalizerDeleteDependents && f != string(corev1.FinalizerKubernetes) {
			errs = append(errs, field.Invalid(field.NewPath("metadata", "finalizers").Index(i), f, "name is neither a standard finalizer name nor is it fully qualified"))
		}
	}
	size := 0
	for k, v := range cm.Data {
		for _, msg := range validation.IsConfigMapKey(k) {
			errs = append(errs, field.Invalid(field.NewPath("data").Key(k), k, msg))
		}
		if _, dup := cm.BinaryData[k]; dup {
			errs = append(errs, field.Invalid(field.NewPath("data").Key(k), k, "duplicate of key present in binaryData"))
		}
		size += len(v)
	}
	for k, v := range cm.BinaryData {
		for _, msg := range validation.IsConfigMapKey(k) {
			errs = append(errs, field.Invalid(field.NewPath("binaryData").Key(k), k, msg))
		}
		size += len(v)
	}
	if size > corev1MaxSecretSize {
		errs = append(errs, field.TooLong(field.NewPath("data"), "", corev1MaxSecretSize))
	}
	return errorsOf(errs)
}

// corev1MaxSecretSize bounds the data of a ConfigMap (or Secret), 1 MiB.
const corev1MaxSecretSize = 1 << 20

// liveConfigMap is what validating an apply needs of the live ConfigMap —
// whether it is immutable, its annotations, data and binary data — read
// from the cache's object: the apiserver wrote it, and converting it whole
// would cost as much as checking the desired one.
func liveConfigMap(live map[string]any) (*corev1.ConfigMap, error) {
	var old corev1.ConfigMap
	immutable, _, err := unstructured.NestedBool(live, "immutable")
	if err != nil {
		return nil, err
	}
	old.Immutable = &immutable
	if old.Annotations, _, err = unstructured.NestedStringMap(live, "metadata", "annotations"); err != nil {
		return nil, err
	}
	if old.Data, _, err = unstructured.NestedStringMap(live, "data"); err != nil {
		return nil, err
	}
	binary, _, err := unstructured.NestedStringMap(live, "binaryData")
	if err != nil {
		return nil, err
	}
	if len(binary) > 0 {
		old.BinaryData = make(map[string][]byte, len(binary))
	}
	for k, v := range binary {
		if old.BinaryData[k], err = base64.StdEncoding.DecodeString(v); err != nil {
			return nil, fmt.Errorf("binaryData[%s]: %w", k, err)
		}
	}
	return &old, nil
}

// union is a copy of base with over's entries over it.
func union[V any](base, over map[string]V) map[string]V {
	out := maps.Clone(base)
	if out == nil {
		out = map[string]V{}
	}
	maps.Copy(out, over)
	return out
}

// customSchema is what the apiserver validates a custom resource of one
// version of a CRD against, besides its metadata.
type customSchema struct {
	state      string // the CRD's uid and resourceVersion
	gvk        schema.GroupVersionKind
	namespaced bool
	structural *structuralschema.Structural
	validator  *validate.SchemaValidator
	// refusable, when set, says why any object of the kind could be
	// refused, whatever it holds.
	refusable string
}

// custom returns the compiled schema of a version of a CRD.
func (s *schemas) custom(crd *apiextensionsv1.CustomResourceDefinition, version string) *customSchema {
	key := crd.Name + "/" + version
	state := string(crd.UID) + "/" + crd.ResourceVersion
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.compiled[key]; c != nil && c.state == state {
		return c
	}
	c := compile(crd, version)
	c.state = state
	s.compiled[key] = c
	return c
}

// compile makes the schema of one version of a CRD. The apiserver's
// validation of a custom resource is its schema, its x-kubernetes
// extensions, its CEL rules, its scale subresource and, through a
// conversion webhook, the webhook's answer. uc checks the schema and the
// extensions, and only where the schema constrains single fields: an
// object's fields then stay valid whatever the apiserver adds to them (its
// defaults, the fields of other field managers that a server-side apply
// keeps). A schema with CEL rules (x-kubernetes-validations) or a
// constraint across fields (allOf, anyOf, oneOf, not, maxItems,
// maxProperties), a scale subresource or a conversion webhook makes every
// object of the kind refusable.
func compile(crd *apiextensionsv1.CustomResourceDefinition, version string) (c *customSchema) {
	c = &customSchema{namespaced: crd.Spec.Scope == apiextensionsv1.NamespaceScoped}
	i := slices.IndexFunc(crd.Spec.Versions, func(v apiextensionsv1.CustomResourceDefinitionVersion) bool { return v.Name == version })
	switch {
	case crd.DeletionTimestamp != nil:
		c.refusable = "its CustomResourceDefinition is being deleted"
	case !established(crd):
		c.refusable = "its CustomResourceDefinition is not established"
	case i < 0 || !crd.Spec.Versions[i].Served || crd.Spec.Versions[i].Schema == nil || crd.Spec.Versions[i].Schema.OpenAPIV3Schema == nil:
		c.refusable = fmt.Sprintf("its CustomResourceDefinition does not serve version %s with a schema", version)
	case crd.Spec.Conversion != nil && crd.Spec.Conversion.Strategy == apiextensionsv1.WebhookConverter:
		c.refusable = "its CustomResourceDefinition converts through a webhook"
	case crd.Spec.Versions[i].Subresources != nil && crd.Spec.Versions[i].Subresources.Scale != nil:
		c.refusable = "its CustomResourceDefinition has a scale subresource"
	}
	if c.refusable != "" {
		return c
	}
	v := crd.Spec.Versions[i]
	c.gvk = schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind}
	var err error
	if c.structural, err = core.Structural(v.Schema.OpenAPIV3Schema); err != nil {
		c.refusable = fmt.Sprintf("its schema is not structural: %v", err)
		return c
	}
	if where := crossField(c.structural, ""); where != "" {
		c.refusable = fmt.Sprintf("its schema has CEL rules or constraints across fields (at %s), which uc does not check", where)
		return c
	}
	defer func() {
		if r := recover(); r != nil { // kube-openapi panics on a schema it cannot use
			c.validator, c.refusable = nil, fmt.Sprintf("its schema cannot be used: %v", r)
		}
	}()
	c.validator = validate.NewSchemaValidator(c.structural.ToKubeOpenAPI(), nil, "", strfmt.Default)
	return c
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	return slices.ContainsFunc(crd.Status.Conditions, func(c apiextensionsv1.CustomResourceDefinitionCondition) bool {
		return c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue
	})
}

// crossField returns the path of the first CEL rule or constraint across
// fields in a schema, or "". An int-or-string's anyOf is a single field's.
func crossField(s *structuralschema.Structural, path string) string {
	if s == nil {
		return ""
	}
	if s.XValidations != nil {
		return orRoot(path)
	}
	if vv := s.ValueValidation; vv != nil {
		if vv.MaxItems != nil || vv.MaxProperties != nil || len(vv.AllOf) > 0 || len(vv.OneOf) > 0 || vv.Not != nil || vv.UniqueItems ||
			len(vv.AnyOf) > 0 && !s.XIntOrString {
			return orRoot(path)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(s.Properties)) {
		p := s.Properties[k]
		if where := crossField(&p, path+"."+k); where != "" {
			return where
		}
	}
	if where := crossField(s.Items, path+"[*]"); where != "" {
		return where
	}
	if s.AdditionalProperties != nil {
		return crossField(s.AdditionalProperties.Structural, path+"[*]")
	}
	return ""
}

func orRoot(path string) string {
	if path == "" {
		return "the root"
	}
	return strings.TrimPrefix(path, ".")
}

// couldRefuse validates a custom resource as the apiserver does
// (k8s.io/apiextensions-apiserver/pkg/registry/customresource): its
// apiVersion and kind, its metadata, its schema, its embedded resources and
// its list-type sets and maps. A field the schema does not declare, which
// the apiserver prunes, could be refused too: a server-side apply may not
// prune it.
func (c *customSchema) couldRefuse(w Write) string {
	if c.refusable != "" {
		return c.refusable
	}
	obj := runtime.DeepCopyJSON(w.New.Object)
	if got := w.New.GroupVersionKind(); got != c.gvk {
		return fmt.Sprintf("a %s is not a %s", got, c.gvk)
	}
	raw, _ := obj["metadata"].(map[string]any)
	m, err := decodeMeta(raw)
	if err != nil {
		return fmt.Sprintf("metadata: %v", err)
	}
	if w.Old != nil { // the annotations the apply does not set stay
		m.Annotations = union(w.Old.GetAnnotations(), m.Annotations)
	}
	if pruned := pruning.PruneWithOptions(obj, c.structural, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true}); len(pruned) > 0 {
		return fmt.Sprintf("fields its schema does not declare: %s", strings.Join(pruned, ", "))
	}
	errs := validateMeta(&m, c.namespaced)
	errs = append(errs, schemaobjectmeta.Validate(nil, obj, c.structural, false)...)
	errs = append(errs, listtype.ValidateListSetsAndMaps(nil, c.structural, obj)...)
	var all []error
	if res := c.validator.Validate(obj); res != nil {
		all = res.Errors
	}
	return problems(append(all, errorsOf(errs)...))
}
