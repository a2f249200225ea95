package preflight

import (
	"context"
	"fmt"
	"sync"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
)

// authzTTL is how long an answer of the authorizer is kept: uc's own
// permissions change rarely, and a write they no longer allow is refused
// before any other write only within that time.
const authzTTL = time.Minute

// authz asks the apiserver whether uc may make a write
// (SelfSubjectAccessReviews), and keeps the answers for authzTTL: a
// permission for all namespaces, which uc's ClusterRoles give, is asked
// once for all of them.
type authz struct {
	reviews authorizationclient.SelfSubjectAccessReviewInterface
	now     func() time.Time

	mu      sync.Mutex
	answers map[access]answer
}

// access is one verb on one resource, in one namespace ("" for all).
type access struct{ group, resource, namespace, verb string }

type answer struct {
	allowed bool
	until   time.Time
}

func newAuthz(reviews authorizationclient.SelfSubjectAccessReviewInterface) *authz {
	return &authz{reviews: reviews, now: time.Now, answers: map[access]answer{}}
}

// verbs are the authorizer's verbs a write needs: an apply is a patch that
// creates the object if it is gone.
func (w Write) verbs() []string {
	switch w.Verb {
	case Create:
		return []string{"create"}
	case Apply:
		return []string{"patch", "create"}
	case Delete:
		return []string{"delete"}
	}
	return []string{"patch"}
}

// couldRefuse tells which permission uc may lack for the write, or "".
func (a *authz) couldRefuse(ctx context.Context, w Write) string {
	gvr, namespace := w.Resource.GVR, w.object().GetNamespace()
	for _, verb := range w.verbs() {
		k := access{gvr.Group, gvr.Resource, "", verb}
		allowed, err := a.allowed(ctx, k)
		if err == nil && !allowed && namespace != "" {
			k.namespace = namespace
			allowed, err = a.allowed(ctx, k)
		}
		switch {
		case err != nil:
			return fmt.Sprintf("ask whether uc may %s it: %v", verb, err)
		case !allowed:
			return fmt.Sprintf("uc may not %s it", verb)
		}
	}
	return ""
}

func (a *authz) allowed(ctx context.Context, k access) (bool, error) {
	a.mu.Lock()
	ans, ok := a.answers[k]
	a.mu.Unlock()
	if ok && a.now().Before(ans.until) {
		return ans.allowed, nil
	}
	review, err := a.reviews.Create(ctx, &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: k.namespace, Verb: k.verb, Group: k.group, Resource: k.resource},
	}}, metav1.CreateOptions{})
	if err != nil {
		return false, err
	}
	a.mu.Lock()
	a.answers[k] = answer{allowed: review.Status.Allowed, until: a.now().Add(authzTTL)}
	a.mu.Unlock()
	return review.Status.Allowed, nil
}
