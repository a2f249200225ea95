// Package preflight tells whether the apiserver could refuse a write, so
// that the applier dry-runs a reply only when one of its writes could be
// refused. A reply is never half-applied (the design's invariant 7): its
// writes must be known good before the first one lands. The apiserver
// refuses a write for an invalid object, an admission webhook, a
// ValidatingAdmissionPolicy (or a MutatingAdmissionPolicy's doing), a
// quota, a namespace that is gone or going, or authorization. Each is
// judged here without a write: the object is validated on the client as
// the apiserver validates it, where uc knows how (ConfigMaps, and custom
// resources whose schema constrains single fields only); webhooks,
// policies, quotas and namespaces are watched and matched to the write;
// authorization is asked once a minute. Wherever uc cannot tell, a write
// could be refused.
package preflight

import (
	"context"
	"fmt"
	"log/slog"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"universalcontroller.dev/uc/core"
)

// Verb is what a write does to an object.
type Verb string

const (
	// Create creates an object.
	Create Verb = "create"
	// Apply updates an object with server-side apply (which creates it
	// if it is gone).
	Apply Verb = "apply"
	// Release patches an object's metadata only, taking an
	// ownerReference off: the object stays as valid as it was.
	Release Verb = "release"
	// Delete deletes an object.
	Delete Verb = "delete"
)

// Write is one write the applier is to make.
type Write struct {
	Verb     Verb
	Resource core.Resource
	// New is the object as written (Create, Apply).
	New *unstructured.Unstructured
	// Old is the live object, as the cache has it (Apply, Release,
	// Delete); nil when the cache does not have it.
	Old *unstructured.Unstructured
}

func (w Write) object() *unstructured.Unstructured {
	if w.New != nil {
		return w.New
	}
	return w.Old
}

func (w Write) String() string {
	o := w.object()
	key := o.GetName()
	if ns := o.GetNamespace(); ns != "" {
		key = ns + "/" + key
	}
	return fmt.Sprintf("%s %s %s", w.Verb, w.Resource.GVR.Resource, key)
}

// operations are the admission operations the write may be.
func (w Write) operations() []admissionv1.OperationType {
	switch w.Verb {
	case Create:
		return []admissionv1.OperationType{admissionv1.Create}
	case Apply:
		return []admissionv1.OperationType{admissionv1.Update, admissionv1.Create}
	case Delete:
		return []admissionv1.OperationType{admissionv1.Delete}
	}
	return []admissionv1.OperationType{admissionv1.Update}
}

// CRDs gives the CustomResourceDefinition of a resource (nil for a
// resource no CRD defines).
type CRDs interface {
	CustomResourceDefinition(ctx context.Context, gr schema.GroupResource) (*apiextensionsv1.CustomResourceDefinition, error)
}

// Checker tells whether the apiserver could refuse a write.
type Checker struct {
	admission *admission
	schemas   *schemas
	authz     *authz
}

// New makes a Checker that asks the apiserver with kube and watches it
// with watchKube and watchDyn (clients without a request timeout). Run
// it: until its informers have listed what they watch, every write could
// be refused.
func New(kube, watchKube kubernetes.Interface, watchDyn dynamic.Interface, crds CRDs, log *slog.Logger) *Checker {
	log = log.With("component", "preflight")
	return &Checker{
		admission: newAdmission(kube.Discovery(), watchKube, watchDyn, log),
		schemas:   newSchemas(crds),
		authz:     newAuthz(kube.AuthorizationV1().SelfSubjectAccessReviews()),
	}
}

// Run watches admission webhooks, policies, quotas and namespaces until ctx
// ends.
func (c *Checker) Run(ctx context.Context) error {
	c.admission.run(ctx)
	return nil
}

// CouldRefuse tells why the apiserver could refuse the write, or "" when
// it cannot (as far as a write's own content and the cluster's admission
// go: a write can still fail, and be retried, for a conflict or an
// apiserver that does not answer).
func (c *Checker) CouldRefuse(ctx context.Context, w Write) string {
	why := c.admission.couldRefuse(w)
	if why == "" {
		why = c.schemas.couldRefuse(ctx, w)
	}
	if why == "" {
		why = c.authz.couldRefuse(ctx, w)
	}
	if why == "" {
		return ""
	}
	return fmt.Sprintf("%s: %s", w, why)
}
