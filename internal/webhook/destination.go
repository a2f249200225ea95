package webhook

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"

	"github.com/cloudevents/sdk-go/v2/binding"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	duckv1 "knative.dev/pkg/apis/duck/v1"
	"knative.dev/pkg/resolver"

	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/sdk/go/hook"
)

// ReasonUnresolved is the failure reason of a destination whose URL cannot
// be resolved: its object is missing, or has no address yet.
const ReasonUnresolved = "DestinationUnresolved"

// destinationHandler calls a Knative Addressable, or any URL, with the
// request as a CloudEvent over HTTP in binary mode, and Prefer: reply. The
// CloudEvent in the 200 response is the reply. The destination is resolved
// for every call from the resolver's informer, which tracks the object, so
// a new status.address.url is used as soon as it is observed.
type destinationHandler struct {
	hook       string
	dest       duckv1.Destination
	controller *unstructured.Unstructured // tracks the destination's object
	resolver   *resolver.URIResolver
	client     *http.Client
	limit      int64
}

// NewDestination is the handler of the hook name that calls a
// destination (spec.destination of a hook): resolve turns it into a URL,
// controller is the object that tracks it. A reply larger than limit bytes
// fails the call.
func NewDestination(name string, dest duckv1.Destination, controller *unstructured.Unstructured, resolve *resolver.URIResolver, limit int64) hook.Handler {
	return &destinationHandler{hook: name, dest: dest, controller: controller, resolver: resolve,
		client: &http.Client{Transport: traced(http.DefaultTransport)}, limit: limit}
}

func (h *destinationHandler) Hook() string { return h.hook }

func (h *destinationHandler) Handle(ctx context.Context, _ []byte) (any, error) {
	target, err := h.resolver.URIFromDestinationV1(ctx, h.dest, h.controller)
	if err != nil {
		return nil, &hook.Error{Reason: ReasonUnresolved, Err: err}
	}
	req, ok := hook.Request(ctx)
	if !ok {
		return nil, fmt.Errorf("destination %s: called outside hook.Serve", target)
	}
	httpReq, err := http.NewRequestWithContext(ctx, http.MethodPost, target.String(), nil)
	if err == nil {
		err = cehttp.WriteRequest(ctx, binding.ToMessage(req), httpReq)
	}
	if err != nil {
		return nil, &hook.Error{Reason: ReasonInvalidHookConfig, Err: fmt.Errorf("destination %s: %w", target, err)}
	}
	httpReq.Header.Set("Prefer", "reply")
	hook.Logger(ctx).Debug("calling destination", "url", target)
	header, body, err := post(h.client, httpReq, h.limit)
	if err != nil {
		return nil, err
	}
	msg := cehttp.NewMessage(header, io.NopCloser(bytes.NewReader(body)))
	if msg.ReadEncoding() == binding.EncodingUnknown && len(body) == 0 {
		return nil, &hook.Error{Reason: hook.ReasonInvalidReply, Err: fmt.Errorf("destination %s: empty reply: a hook must answer with a CloudEvent in its 200 response", target)}
	}
	reply, err := binding.ToEvent(ctx, msg)
	if err != nil {
		return nil, &hook.Error{Reason: hook.ReasonInvalidReply, Err: fmt.Errorf("destination %s: the 200 response holds no CloudEvent: %w%s", target, err, excerpt(body))}
	}
	if want := bus.ResponseType(h.hook); reply.Type() != want {
		return nil, &hook.Error{Reason: hook.ReasonInvalidReply, Err: fmt.Errorf("destination %s: reply of type %q, want %q", target, reply.Type(), want)}
	}
	return jsonReply(reply.DataContentType(), reply.Data())
}
