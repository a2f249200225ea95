package webhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"

	"k8s.io/client-go/kubernetes"

	"universalcontroller.dev/uc/schemas/v1alpha1"
	"universalcontroller.dev/uc/sdk/go/hook"
)

// webhookHandler calls a Metacontroller webhook: it POSTs the hook request
// as plain JSON, and the body of the 200 response is the reply, so an
// unchanged Metacontroller hook works.
type webhookHandler struct {
	hook      string
	spec      *v1alpha1.Webhook
	endpoints []v1alpha1.EndpointConfig // the controller's endpointConfigs
	kube      kubernetes.Interface
	limit     int64
	etags     *etagCache // nil unless webhook.etag enables it

	mu     sync.Mutex
	target *webhookTarget // built on first use
}

type webhookTarget struct {
	url    string
	client *http.Client
}

func newWebhookHandler(hook string, spec *v1alpha1.Webhook, endpoints []v1alpha1.EndpointConfig, kube kubernetes.Interface, limit int64) *webhookHandler {
	return &webhookHandler{hook: hook, spec: spec, endpoints: endpoints, kube: kube, limit: limit, etags: newEtagCache(spec.Etag)}
}

// New is the handler of the hook name that calls a webhook: spec says
// where it is and how to connect, with the controller's endpoints; kube
// reads the Secrets and ConfigMaps a connection names, and may be nil when
// it names none. A reply larger than limit bytes fails the call.
func New(name string, spec *v1alpha1.Webhook, endpoints []v1alpha1.EndpointConfig, kube kubernetes.Interface, limit int64) hook.Handler {
	return newWebhookHandler(name, spec, endpoints, kube, limit)
}

func (h *webhookHandler) Hook() string { return h.hook }

func (h *webhookHandler) Handle(ctx context.Context, data []byte) (any, error) {
	t, err := h.resolve(ctx)
	if err != nil {
		return nil, &hook.Error{Reason: ReasonInvalidHookConfig, Err: err}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, bytes.NewReader(data))
	if err != nil {
		return nil, &hook.Error{Reason: ReasonInvalidHookConfig, Err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	// webhook.etag: ask with the ETag of the parent's last reply, which a
	// 304 or 412 answer means again.
	var key etagKey
	var cached etagEntry
	if h.etags != nil {
		key = etagKeyOf(ctx, data)
		if e, ok := h.etags.get(key); ok {
			cached = e
			req.Header.Set("If-None-Match", e.etag)
		}
	}
	header, body, err := post(t.client, req, h.limit)
	switch {
	case errors.Is(err, errNotModified):
		hook.Logger(ctx).Debug("webhook reply not modified", "etag", cached.etag)
		return cached.reply, nil
	case err != nil:
		return nil, err
	}
	reply, err := jsonReply(header.Get("Content-Type"), body)
	if etag := header.Get("ETag"); err == nil && etag != "" && h.etags != nil {
		h.etags.put(key, etag, reply)
	}
	return reply, err
}

// resolve builds the webhook's URL and client on first use, and again after
// a failure, so a Secret created after the controller is found then.
func (h *webhookHandler) resolve(ctx context.Context) (*webhookTarget, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.target != nil {
		return h.target, nil
	}
	u, err := webhookURL(h.spec)
	if err != nil {
		return nil, err
	}
	client, err := webhookClient(ctx, h.kube, connectionFor(h.spec, u, h.endpoints))
	if err != nil {
		return nil, err
	}
	h.target = &webhookTarget{url: u.String(), client: client}
	return h.target, nil
}

// webhookURL is where a webhook is, as Metacontroller reads it: url, or
// <protocol>://<service>.<namespace>:<port><path>, by default on http and
// port 80.
func webhookURL(w *v1alpha1.Webhook) (*url.URL, error) {
	if w.URL != nil {
		u, err := url.Parse(*w.URL)
		if err != nil {
			return nil, fmt.Errorf("webhook url: %w", err)
		}
		return u, nil
	}
	svc := w.Service
	if svc == nil {
		return nil, errors.New("webhook has neither url nor service")
	}
	port := int32(80)
	if svc.Port != nil {
		port = *svc.Port
	}
	u := &url.URL{Scheme: "http", Host: net.JoinHostPort(svc.Name+"."+svc.Namespace, strconv.Itoa(int(port)))}
	if svc.Protocol != nil {
		u.Scheme = *svc.Protocol
	}
	if w.Path != nil {
		u.Path = *w.Path
	}
	return u, nil
}
