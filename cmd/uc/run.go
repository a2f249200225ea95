package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"

	"universalcontroller.dev/uc/applier"
	"universalcontroller.dev/uc/core"
	"universalcontroller.dev/uc/dispatcher"
	"universalcontroller.dev/uc/internal/compact"
	"universalcontroller.dev/uc/internal/metawrites"
	"universalcontroller.dev/uc/internal/natsauth"
	"universalcontroller.dev/uc/internal/preflight"
	"universalcontroller.dev/uc/internal/registry"
	"universalcontroller.dev/uc/internal/topology"
	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/v1alpha1"
	"universalcontroller.dev/uc/watcher"
)

// run wires the configured roles together and runs them until ctx ends.
func run(ctx context.Context, cfg config, log *slog.Logger) error {
	if cfg.metricsCertDir != "" && !cfg.metricsSecure {
		return errors.New("--metrics-cert-dir serves --metrics-secure: set it too")
	}
	restCfg, err := kubeConfig(cfg)
	if err != nil {
		return err
	}
	m := newMetrics()
	nc, err := connectNATS(cfg, log)
	if err != nil {
		return err
	}
	defer nc.Close()
	rawJS, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	js := observedJetStream{rawJS, m}
	tracers := newTracers(cfg.tracing, log)
	defer tracers.shutdown(ctx)

	// uc's writes answer with the written object's metadata only: it reads
	// nothing else of them.
	dyn, err := writesClient(restCfg)
	if err != nil {
		return err
	}
	// The informers' watches (the registry's, the dispatcher's Knative
	// resolver's) last longer than any request timeout.
	watchCfg := watchConfig(restCfg)
	watchHTTP, err := rest.HTTPClientFor(watchCfg)
	if err != nil {
		return err
	}
	watchDyn, err := dynamic.NewForConfigAndClient(watchCfg, watchHTTP)
	if err != nil {
		return err
	}
	// The registries' informers decode objects straight into their
	// caches' compact form.
	objects, err := compact.NewSource(watchCfg, watchHTTP)
	if err != nil {
		return err
	}
	kube, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return err
	}
	// One registry for every role in this process: a resource type is
	// watched once, however many roles and controllers use it.
	ucEvents, stopEvents := recordEvents(ctx, kube, v1alpha1.EventSource)
	defer stopEvents()
	recorder := observedRecorder{ucEvents, m}
	var regOpts []registry.Option
	if cfg.roles.dispatcher {
		// The dispatcher reports on UniversalControllers: their Ready
		// condition, and their failing parents, counted from the parents'
		// Synced conditions in its caches, whichever applier wrote them.
		regOpts = append(regOpts, registry.WithStatus(dyn, recorder))
	}
	if cfg.roles == (roleSet{dispatcher: true}) {
		// Nothing else in the process reads children or revisions.
		regOpts = append(regOpts, registry.WithParentsOnly())
	}
	if cfg.roles.applier && cfg.embedded && cfg.nats.URL == "" {
		// uc run on its embedded NATS server makes every apply itself: the
		// failures its applier saw are all there are, so the failing
		// parents that cannot carry a Synced condition count too.
		regOpts = append(regOpts, registry.WithSoleApplier())
	}
	if cfg.roles.applier { // the applier writes parents' status against their schemas
		regOpts = append(regOpts, registry.WithStatusSchemas())
	}
	// An applier replica of a sharded installation caches only the
	// partitions it holds; a process with other roles (uc run) needs
	// every parent.
	heldOnly := cfg.shardWatchers && cfg.roles == roleSet{applier: true}
	if heldOnly {
		regOpts = append(regOpts, registry.WithHeldPartitions(cfg.partitions))
	}
	// What every registry of the process serves: the one of its roles, and
	// each term's of a watcher shard.
	served := []registry.Option{registry.WithSource(objects)}
	if cfg.metacontrollerAPI {
		served = append(served, registry.WithMetacontrollerAPI())
	}
	if cfg.controllerSelector != "" {
		sel, err := labels.Parse(cfg.controllerSelector)
		if err != nil {
			return fmt.Errorf("--controller-selector: %w", err)
		}
		served = append(served, registry.WithSelector(sel))
	}
	if cfg.shardWatchers {
		served = append(served, registry.WithShardedWatchers(cfg.partitions))
	}
	reg := registry.New(watchDyn, kube.Discovery(), log, append(regOpts, served...)...)

	var runners []func(context.Context) error
	var onBus onBus
	var active activeWatcher
	// A process that is only a watcher shard needs no registry of every
	// parent: each of its terms has its own.
	shardOnly := cfg.shardWatchers && !cfg.roles.dispatcher && !cfg.roles.applier
	registries := func() []*registry.Registry {
		out := []*registry.Registry{active.registry()}
		if !shardOnly {
			out = append(out, reg)
		}
		return slices.DeleteFunc(slices.Compact(out), func(r *registry.Registry) bool { return r == nil })
	}
	if cfg.roles.dispatcher {
		tp, err := tracers.provider(ctx, "dispatcher")
		if err != nil {
			return err
		}
		hookConsumers := topology.NewHookConsumers(js, log.With("component", "dispatcher"))
		reg.Subscribe(func(old, cur *core.Controller) {
			name, declared := core.DeclaredHooks(old, cur)
			hookConsumers.Declare(name, slices.Collect(maps.Keys(declared)))
		})
		d := dispatcher.New(js, reg, kube, watchDyn, dispatcher.Options{MaxReplyBytes: cfg.maxReplyBytes, Calls: m, TracerProvider: tp}, log)
		runners = append(runners, hookConsumers.Run, d.Run)
		onBus.add(topology.Dispatcher(), hookConsumers.Consumers)
	}
	if cfg.roles.watcher {
		tp, err := tracers.provider(ctx, "watcher")
		if err != nil {
			return err
		}
		// Each term of leading, or of holding partitions, has a watcher of
		// its own, which starts from the caches and the fences as a new
		// process would.
		watch := func(ctx context.Context, reg *registry.Registry, held []int, lease func() error) error {
			w := watcher.New(reg, js, watcher.Options{Partitions: cfg.partitions, Workers: cfg.watcherWorkers, TracerProvider: tp, Lease: lease, Held: held}, log)
			defer w.Close()
			active.set(w, reg)
			defer active.set(nil, nil)
			return w.Run(ctx)
		}
		switch {
		case cfg.shardWatchers:
			id, err := replicaID(cfg)
			if err != nil {
				return err
			}
			onBus.add(topology.ShardedWatcher(cfg.partitions), active.Consumers)
			term := func(ctx context.Context, partitions []int, lease func() error) error {
				termReg := registry.New(watchDyn, kube.Discovery(), log, append(slices.Clip(served), registry.WithPartitions(partitions))...)
				go termReg.Run(ctx)
				return watch(ctx, termReg, partitions, lease)
			}
			runners = append(runners, shardedWatcher(js, cfg, id, term, log))
		case cfg.leaderElect:
			onBus.add(topology.Watcher(cfg.partitions), active.Consumers)
			runners = append(runners, leaderElected(kube, cfg.leaseNamespace, cfg.leaseName, log, func(ctx context.Context, lease func() error) error {
				return watch(ctx, reg, nil, lease)
			}))
		default:
			onBus.add(topology.Watcher(cfg.partitions), active.Consumers)
			runners = append(runners, func(ctx context.Context) error { return watch(ctx, reg, nil, nil) })
		}
	}
	if cfg.roles.applier {
		id, err := replicaID(cfg)
		if err != nil {
			return err
		}
		watchKube, err := kubernetes.NewForConfig(watchConfig(restCfg))
		if err != nil {
			return err
		}
		tp, err := tracers.provider(ctx, "applier")
		if err != nil {
			return err
		}
		checks := preflight.New(kube, watchKube, watchDyn, reg, log)
		// The Events hooks ask for have a broadcaster of their own: their
		// rate limit is per parent and reason, and they do not eat into
		// the budget of uc's own Events on the parent.
		hookEvents, stopHookEvents := recordEvents(ctx, kube, v1alpha1.HookEventSource, record.WithCorrelatorOptions(applier.HookEventCorrelation))
		defer stopHookEvents()
		opts := applier.Options{Workers: cfg.applierWorkers, Replicas: cfg.replicas, Partitions: cfg.partitions, ReplicaID: id,
			MaxChildren: cfg.maxChildren, Preflight: checks, HookEvents: hookEvents, Observer: m.applies, Shadows: m.shadows,
			TracerProvider: tp}
		if heldOnly {
			opts.Caches = reg
		}
		a := applier.New(reg, dyn, js, recorder, opts, log)
		m.reg.MustRegister(applierCollector{a})
		runners = append(runners, checks.Run, a.Run)
		onBus.add(topology.Applier(cfg.partitions), a.Consumers)
	}
	if !shardOnly {
		runners = append(runners, func(ctx context.Context) error { reg.Run(ctx); return nil })
	}
	m.reg.MustRegister(cacheCollector{registries})
	// The dispatcher reports on the streams it creates.
	m.reg.MustRegister(newBusCollector(js, onBus.creates.Streams, onBus.consumers, log))

	// Probes and metrics answer from the start: /readyz says what the
	// roles still wait for. A NATS connection closed for good ends the
	// process, to be started again.
	servers := []func(context.Context) error{bus.UntilClosed(nc), func(ctx context.Context) error {
		if err := ensureStreams(ctx, onBus, topology.Options{Replicas: cfg.replicas}, js, log); err != nil {
			return err
		}
		v := readVersion()
		log.Info("uc started", "version", v.version, "commit", v.commit, "watcher", cfg.roles.watcher, "dispatcher", cfg.roles.dispatcher, "applier", cfg.roles.applier, "apiserver", restCfg.Host, "nats", nc.ConnectedUrlRedacted())
		return runAll(ctx, runners)
	}}
	if cfg.healthAddr != "" {
		servers = append(servers, serveHealth(cfg.healthAddr, readyChecks(nc, js, registries, onBus), log))
	}
	if cfg.metricsAddr != "" {
		serve, err := serveMetrics(cfg, m, kube, log)
		if err != nil {
			return err
		}
		servers = append(servers, serve)
	}
	return runAll(ctx, servers)
}

// onBus is what the process's roles do on the bus, as their
// topology.Role declares it, and the consumers each needs now.
type onBus struct {
	creates, waitsFor topology.Resources
	consumers         []func() []topology.Consumer
}

func (b *onBus) add(r topology.Role, consumers func() []topology.Consumer) {
	b.creates = topology.Union(b.creates, r.Creates)
	b.waitsFor = topology.Union(b.waitsFor, r.WaitsFor)
	b.consumers = append(b.consumers, consumers)
}

// needs are the streams and buckets the roles create or wait for.
func (b onBus) needs() topology.Resources { return topology.Union(b.creates, b.waitsFor) }

// ensureStreams creates the streams the process's roles create (the
// dispatcher's), and waits until those they wait for exist: the other
// roles' NATS users may not create them. A NATS cluster that is still
// electing its leaders answers with timeouts: wait for it rather than exit.
func ensureStreams(ctx context.Context, b onBus, opts topology.Options, js jetstream.JetStream, log *slog.Logger) error {
	if len(b.creates.Streams) > 0 {
		err := retryUntil(ctx, 2*time.Minute, log, "create the streams", func(ctx context.Context) error {
			return topology.EnsureStreams(ctx, js, b.creates.Streams, opts)
		})
		if err != nil {
			return err
		}
	}
	return retryUntil(ctx, 5*time.Minute, log, "wait for the dispatcher's streams", func(ctx context.Context) error {
		for _, s := range b.waitsFor.Streams {
			if _, err := js.Stream(ctx, s.Name); err != nil {
				return fmt.Errorf("stream %s: %w", s.Name, err)
			}
		}
		return nil
	})
}

// readyChecks are what /readyz requires: the NATS connection is up, the
// registry's caches are filled, and the streams, buckets and consumers the
// process's roles use exist. The roles create again what is lost.
func readyChecks(nc *nats.Conn, js jetstream.JetStream, registries func() []*registry.Registry, b onBus) []readyCheck {
	checks := []readyCheck{{"nats", func(context.Context) error {
		if !nc.IsConnected() {
			return fmt.Errorf("not connected: %s", nc.Status())
		}
		return nil
	}}, {"informers", func(context.Context) error {
		for _, reg := range registries() {
			if u := reg.Unsynced(); len(u) > 0 {
				return errors.New(strings.Join(u, "; "))
			}
		}
		return nil
	}}}
	needs := b.needs()
	checks = append(checks, readyCheck{"streams", func(ctx context.Context) error {
		for _, s := range needs.Streams {
			if _, err := js.Stream(ctx, s.Name); err != nil {
				return fmt.Errorf("%s: %w", s.Name, err)
			}
		}
		return nil
	}})
	if len(needs.Buckets) > 0 {
		checks = append(checks, readyCheck{"buckets", func(ctx context.Context) error {
			for _, bucket := range needs.Buckets {
				if _, err := js.KeyValue(ctx, bucket.Name); err != nil {
					return fmt.Errorf("%s: %w", bucket.Name, err)
				}
			}
			return nil
		}})
	}
	for _, consumers := range b.consumers {
		checks = append(checks, readyCheck{"consumers", func(ctx context.Context) error {
			for _, c := range consumers() {
				if _, err := js.Consumer(ctx, c.Stream, c.Name()); err != nil {
					return fmt.Errorf("%s: %w", c.Name(), err)
				}
			}
			return nil
		}})
	}
	return checks
}

// retryUntil calls fn until it succeeds, every second, each attempt for at
// most 10s, for at most timeout.
func retryUntil(ctx context.Context, timeout time.Duration, log *slog.Logger, what string, fn func(context.Context) error) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		// A cluster electing its leader drops requests: bound each attempt.
		attempt, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if last = fn(attempt); last != nil {
			log.Warn("retrying", "what", what, "err", last)
			return false, nil
		}
		return true, nil
	})
	if err != nil && last != nil {
		return fmt.Errorf("%s: %w", what, last)
	}
	return err
}

// runAll runs every runner; the first error stops them all.
func runAll(ctx context.Context, runners []func(context.Context) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, len(runners))
	for _, r := range runners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := r(ctx); err != nil {
				errs <- err
				cancel()
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// kubeClientConfig is the kubeconfig file at path or, when path is empty,
// $KUBECONFIG's, ~/.kube/config, or the in-cluster configuration.
func kubeClientConfig(path string) clientcmd.ClientConfig {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = path
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{})
}

func kubeConfig(cfg config) (*rest.Config, error) {
	c, err := kubeClientConfig(cfg.kubeconfig).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	c.QPS, c.Burst = float32(cfg.kubeQPS), cfg.kubeBurst
	c.UserAgent = "universalcontroller"
	c.Timeout = restTimeout
	return c, nil
}

// restTimeout bounds every Kubernetes API request but a watch. It is the
// apiserver's own limit on a request (its --request-timeout, 60s by
// default), so a call the apiserver may still answer is never given up on,
// while one that hangs (an apiserver that stopped answering, a connection
// that went silent) fails and is retried instead of holding its caller —
// and with it a parent, or a partition's hand-over — forever.
const restTimeout = time.Minute

// watchConfig is c for the informers: without restTimeout, which client-go
// applies to the whole of a request and so would cut every watch short.
// A watch has its own server-side timeout, and its informer restarts it.
func watchConfig(c *rest.Config) *rest.Config {
	w := rest.CopyConfig(c)
	w.Timeout = 0
	return w
}

// connectNATS connects to --nats-url with the credentials and TLS of the
// flags, receiving responses on the command's inbox prefix
// (natsauth.RoleInbox), or starts the embedded server and connects to it
// in-process.
func connectNATS(cfg config, log *slog.Logger) (*nats.Conn, error) {
	if cfg.nats.URL != "" || !cfg.embedded {
		if cfg.nats.URL == "" {
			return nil, fmt.Errorf("--nats-url is required")
		}
		conn := cfg.nats
		conn.InboxPrefix = natsauth.RoleInbox(cfg.command)
		return conn.Connect("uc-"+cfg.command, log.With("component", "nats"), nil)
	}
	ns, err := startEmbeddedNATS(cfg.natsListen, cfg.dataDir, log.With("component", "nats-server"))
	if err != nil {
		return nil, err
	}
	log.Info("embedded NATS JetStream started", "url", ns.ClientURL(), "dataDir", cfg.dataDir)
	nc, err := nats.Connect(ns.ClientURL(), nats.Name("uc"), nats.MaxReconnects(-1), nats.InProcessServer(ns))
	if err != nil {
		ns.Shutdown()
		return nil, fmt.Errorf("connect to embedded NATS: %w", err)
	}
	nc.SetClosedHandler(func(*nats.Conn) { ns.Shutdown() })
	return nc, nil
}

// replicaID is the applier's --replica-id. uc run with its embedded server
// keeps one in its data dir: restarted on the same data, it takes its
// partitions back at once.
func replicaID(cfg config) (string, error) {
	if cfg.replicaID != "" || !cfg.embedded || cfg.nats.URL != "" {
		return cfg.replicaID, nil
	}
	path := filepath.Join(cfg.dataDir, "replica-id")
	b, err := os.ReadFile(path)
	if err == nil {
		return strings.TrimSpace(string(b)), nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("read the replica id: %w", err)
	}
	id := "uc-run-" + uuid.NewString()[:8]
	if err := os.WriteFile(path, []byte(id+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("keep the replica id: %w", err)
	}
	return id, nil
}

// recordEvents records the Events of component through a broadcaster of
// its own, which writes them to the apiserver until stopped.
func recordEvents(ctx context.Context, kube kubernetes.Interface, component string, opts ...record.BroadcasterOption) (record.EventRecorder, func()) {
	b := record.NewBroadcaster(append([]record.BroadcasterOption{record.WithContext(ctx)}, opts...)...)
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")})
	return b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: component}), b.Shutdown
}

// writesClient is the dynamic client of uc's writes: reads as client-go's,
// writes answered with metadata only (internal/metawrites).
func writesClient(cfg *rest.Config) (dynamic.Interface, error) {
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	return metawrites.New(cfg, httpClient, dyn)
}
