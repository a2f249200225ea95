// Package dispatcher does one job: it delivers hook requests to the hooks
// that are not on the bus — HTTP webhooks (a url, or a service and path) and
// Knative Addressables (a duckv1.Destination) — as CloudEvents over HTTP,
// and publishes their replies. It serves each such hook as a bus-native
// worker would, with the Go SDK (sdk/go/hook), so both keep the
// same delivery promises. The streams and the hooks' consumers it reads are
// internal/topology's, which the dispatcher role also runs.
package dispatcher

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/trace"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"knative.dev/pkg/client/injection/ducks/duck/v1/addressable"
	"knative.dev/pkg/injection/clients/dynamicclient"
	"knative.dev/pkg/resolver"
	"knative.dev/pkg/tracker"

	"universalcontroller.dev/uc/core"
	"universalcontroller.dev/uc/internal/recovery"
	"universalcontroller.dev/uc/internal/registry"
	"universalcontroller.dev/uc/internal/webhook"
	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/schemas/v1alpha1"
	"universalcontroller.dev/uc/sdk/go/hook"
)

// Options tune a Dispatcher.
type Options struct {
	// MaxReplyBytes caps a hook's reply (default: the NATS server's maximum
	// payload).
	MaxReplyBytes int64
	// TracerProvider makes the spans of the hook calls (nil: the global
	// one).
	TracerProvider trace.TracerProvider
	// Calls, if set, hears of every call of a hook.
	Calls CallObserver
}

// Dispatcher serves the hooks that are not on the bus. For every hook of a
// registered controller that has a webhook or a destination, it consumes
// the hook's requests with hook.Serve, as a bus-native worker would, and
// calls the hook over HTTP. It starts and stops serving a hook as
// controllers come, change and go. Several dispatchers share the work.
type Dispatcher struct {
	js   jetstream.JetStream
	kube kubernetes.Interface
	dyn  dynamic.Interface
	opts Options
	log  *slog.Logger

	mu       sync.Mutex
	ctx      context.Context // set by Run; nil before
	resolver *resolver.URIResolver
	served   map[hookKey]*servedHook
	wg       sync.WaitGroup
}

type hookKey struct{ controller, hook string }

// servedHook is one hook the dispatcher serves.
type servedHook struct {
	ctl    *core.Controller
	spec   v1alpha1.Hook
	cancel context.CancelFunc // nil until started
}

// sameHook tells whether a hook's spec, and the controller's endpoint
// configs a webhook may use, are what it is served with.
func (s *servedHook) sameHook(ctl *core.Controller, spec *v1alpha1.Hook) bool {
	return spec != nil && equality.Semantic.DeepEqual(s.spec, *spec) &&
		(spec.Webhook == nil || equality.Semantic.DeepEqual(s.ctl.Spec.EndpointConfigs, ctl.Spec.EndpointConfigs))
}

// Controllers tells the dispatcher of the registered controllers, as
// internal/registry's Registry does.
type Controllers interface {
	Subscribe(l registry.Listener) (unsubscribe func())
}

// New makes a Dispatcher that follows the registry. Run it.
func New(js jetstream.JetStream, reg Controllers, kube kubernetes.Interface, dyn dynamic.Interface, opts Options, log *slog.Logger) *Dispatcher {
	if opts.MaxReplyBytes <= 0 {
		opts.MaxReplyBytes = js.Conn().MaxPayload()
	}
	d := &Dispatcher{js: js, kube: kube, dyn: dyn, opts: opts,
		log: log.With("component", "dispatcher"), served: map[hookKey]*servedHook{}}
	reg.Subscribe(d.onController)
	return d
}

// Run serves the hooks until ctx ends, then waits for the calls in flight.
func (d *Dispatcher) Run(ctx context.Context) error {
	// knative.dev/pkg's resolver finds its dynamic client and duck informers
	// in the context, and runs those informers until it ends.
	ctx = addressable.WithDuck(context.WithValue(ctx, dynamicclient.Key{}, d.dyn))
	d.mu.Lock()
	d.ctx = ctx
	d.resolver = resolver.NewURIResolverFromTracker(ctx, tracker.New(d.destinationChanged, 10*time.Minute))
	for key, s := range d.served {
		d.start(key, s)
	}
	d.mu.Unlock()
	d.log.Info("serving webhooks and destinations")
	<-ctx.Done()
	d.wg.Wait()
	return nil
}

// destinationChanged hears that the object a controller's destination names
// changed. The next call resolves it again.
func (d *Dispatcher) destinationChanged(controller types.NamespacedName) {
	d.log.Debug("destination changed", "controller", controller.Name)
}

func (d *Dispatcher) onController(old, cur *core.Controller) {
	name, specs := core.DeclaredHooks(old, cur)
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, hook := range hooks.All {
		key := hookKey{name, hook}
		spec := specs[hook]
		prev := d.served[key]
		if prev != nil && prev.sameHook(cur, spec) {
			continue
		}
		if prev != nil {
			prev.stop()
			delete(d.served, key)
		}
		if spec == nil || (spec.Webhook == nil && spec.Destination == nil) {
			continue // bus-native
		}
		s := &servedHook{ctl: cur, spec: *spec}
		d.served[key] = s
		if d.ctx != nil {
			d.start(key, s)
		}
	}
}

func (s *servedHook) stop() {
	if s.cancel != nil {
		s.cancel()
	}
}

// start serves one hook until it is stopped or the dispatcher ends. A
// failure to serve is retried.
func (d *Dispatcher) start(key hookKey, s *servedHook) {
	ctx, cancel := context.WithCancel(d.ctx)
	s.cancel = cancel
	h := d.handler(key.hook, s)
	if d.opts.Calls != nil {
		h = observedHandler{h, key.controller, d.opts.Calls}
	}
	concurrency := 16
	if c := s.spec.Delivery; c != nil && c.Concurrency != nil {
		concurrency = int(*c.Concurrency)
	}
	log := d.log.With("controller", key.controller, "hook", key.hook)
	log.Info("serving hook", "webhook", s.spec.Webhook != nil, "destination", s.spec.Destination != nil, "concurrency", concurrency)
	d.wg.Go(func() {
		for delay := time.Second; ctx.Err() == nil; delay = min(2*delay, time.Minute) {
			err := hook.Serve(ctx, d.js, key.controller, h, hook.WithConcurrency(concurrency), hook.WithLogger(d.log), hook.OnPanic(countPanic),
				hook.WithTracerProvider(d.opts.TracerProvider))
			if ctx.Err() != nil {
				return
			}
			log.Error("serving hook failed; will retry", "err", err, "retryIn", delay)
			select {
			case <-ctx.Done():
			case <-time.After(delay):
			}
		}
	})
}

// countPanic counts a delivery's panic, which the SDK recovered.
func countPanic() { recovery.Panics.WithLabelValues(recovery.Hook).Inc() }

func (d *Dispatcher) handler(hook string, s *servedHook) hook.Handler {
	if s.spec.Webhook != nil {
		return webhook.New(hook, s.spec.Webhook, s.ctl.Spec.EndpointConfigs, d.kube, d.opts.MaxReplyBytes)
	}
	return webhook.NewDestination(hook, *s.spec.Destination, s.ctl.Object, d.resolver, d.opts.MaxReplyBytes)
}
