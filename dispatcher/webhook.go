package dispatcher

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"

	"k8s.io/client-go/kubernetes"

	"universalcontroller.dev/uc/dispatcher/worker"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// webhookHandler calls a Metacontroller webhook: it POSTs the hook request
// as plain JSON, and the body of the 200 response is the reply, so an
// unchanged Metacontroller hook works.
type webhookHandler struct {
	hook  string
	spec  *v1alpha1.Webhook
	kube  kubernetes.Interface
	limit int64

	mu     sync.Mutex
	target *webhookTarget // built on first use
}

type webhookTarget struct {
	url    string
	client *http.Client
}

func (h *webhookHandler) Hook() string { return h.hook }

func (h *webhookHandler) Handle(ctx context.Context, data []byte) (any, error) {
	t, err := h.resolve(ctx)
	if err != nil {
		return nil, &worker.Error{Reason: ReasonInvalidHookConfig, Err: err}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, bytes.NewReader(data))
	if err != nil {
		return nil, &worker.Error{Reason: ReasonInvalidHookConfig, Err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	header, body, err := post(t.client, req, h.limit)
	if err != nil {
		return nil, err
	}
	return jsonReply(header.Get("Content-Type"), body)
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
	client, err := webhookClient(ctx, h.kube, h.spec)
	if err != nil {
		return nil, err
	}
	h.target = &webhookTarget{url: u, client: client}
	return h.target, nil
}

// webhookURL is where a webhook is, as Metacontroller reads it: url, or
// <protocol>://<service>.<namespace>.svc:<port><path>, by default on http
// and port 80.
func webhookURL(w *v1alpha1.Webhook) (string, error) {
	if w.URL != nil {
		return *w.URL, nil
	}
	svc := w.Service
	if svc == nil {
		return "", errors.New("webhook has neither url nor service")
	}
	u := url.URL{Scheme: "http", Host: svc.Name + "." + svc.Namespace + ".svc"}
	port := int32(80)
	if svc.Port != nil {
		port = *svc.Port
	}
	u.Host = net.JoinHostPort(u.Host, strconv.Itoa(int(port)))
	if svc.Protocol != nil {
		u.Scheme = *svc.Protocol
	}
	if w.Path != nil {
		u.Path = *w.Path
	}
	return u.String(), nil
}
