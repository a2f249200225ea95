package main

import (
	"flag"
	"os"

	"github.com/spf13/pflag"

	"universalcontroller.dev/uc/applier"
	"universalcontroller.dev/uc/schemas/bus"
)

// roleSet says which roles a process runs.
type roleSet struct{ watcher, dispatcher, applier bool }

// config is every flag of every command.
type config struct {
	command  string // run, watcher, dispatcher or applier
	roles    roleSet
	embedded bool // start an embedded NATS server unless nats.URL is set

	kubeconfig string
	kubeQPS    float64
	kubeBurst  int

	nats       bus.Connection
	natsListen string
	dataDir    string
	replicas   int

	partitions     int
	watcherWorkers int
	applierWorkers int
	maxChildren    int
	maxReplyBytes  int64
	log            logOptions
	tracing        tracingOptions

	leaderElect    bool
	shardWatchers  bool
	leaseNamespace string
	leaseName      string
	healthAddr     string
	metricsAddr    string
	metricsSecure  bool
	metricsCertDir string
	profiling      bool
	replicaID      string

	metacontrollerAPI  bool
	controllerSelector string
}

func (c *config) register(fs *pflag.FlagSet) {
	fs.StringVar(&c.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or in-cluster)")
	fs.Float64Var(&c.kubeQPS, "kube-api-qps", 1000, "queries per second to the Kubernetes API (client-side; negative: no limit, the apiserver's priority and fairness alone)")
	fs.IntVar(&c.kubeBurst, "kube-api-burst", 2000, "burst of queries to the Kubernetes API")
	fs.StringVar(&c.nats.URL, "nats-url", "", "external NATS server URL (uc run: embedded server when empty)")
	// Defaults are empty: setFromEnv sets flags from UC_* variables.
	natsFlags := flag.NewFlagSet("nats", flag.ContinueOnError)
	c.nats.RegisterFlags(natsFlags, func(string) string { return "" })
	fs.AddGoFlagSet(natsFlags)
	if c.embedded {
		fs.StringVar(&c.natsListen, "nats-listen", "127.0.0.1:4222", "address the embedded NATS server listens on, for hook workers (port 0: a free port, logged at start)")
		fs.StringVar(&c.dataDir, "data-dir", "uc-data", "directory of the embedded NATS server's JetStream file storage")
	}
	fs.IntVar(&c.replicas, "stream-replicas", 1, "replicas of the JetStream streams (3 on a NATS cluster)")
	fs.IntVar(&c.partitions, "partitions", bus.DefaultPartitions, "partitions parents are spread over; fixed at install")
	fs.IntVar(&c.watcherWorkers, "watcher-workers", 8, "parents the watcher syncs at once")
	fs.Int64Var(&c.maxReplyBytes, "max-reply-bytes", 0, "largest hook reply the dispatcher takes from a webhook or destination (0: the NATS server's max payload)")
	fs.IntVar(&c.applierWorkers, "applier-workers", 16, "parents the applier applies at once")
	fs.IntVar(&c.maxChildren, "max-children-per-reply", applier.DefaultMaxChildren, "most children one hook reply may have; a reply with more is rejected whole")
	c.log.register(fs)
	c.tracing.register(fs)
	fs.StringVar(&c.healthAddr, "health-addr", "", "address serving /healthz and /readyz, e.g. :8081 (off when empty)")
	fs.StringVar(&c.metricsAddr, "metrics-addr", "127.0.0.1:8080", "address serving Prometheus metrics on /metrics: on loopback by default, for this host only; :8080 serves every interface, for a Prometheus elsewhere (port 0: a free port, logged at start; off when empty)")
	fs.BoolVar(&c.metricsSecure, "metrics-secure", false, "serve --metrics-addr over HTTPS, and only to clients whose bearer token the API server authenticates (a TokenReview) and allows to get the path (a SubjectAccessReview: the ClusterRole uc-metrics-reader allows /metrics), as controller-runtime's metrics server does; uc's ServiceAccount needs create on tokenreviews and subjectaccessreviews. deploy/ and the Helm chart set it")
	fs.StringVar(&c.metricsCertDir, "metrics-cert-dir", "", "directory holding tls.crt and tls.key, the certificate --metrics-secure serves (read again when they change); empty: a self-signed certificate made at start")
	fs.BoolVar(&c.metacontrollerAPI, "metacontroller-api", false, "also serve Metacontroller's CompositeControllers and DecoratorControllers (metacontroller.k8s.io/v1alpha1), adopting what Metacontroller left as it is")
	fs.StringVar(&c.controllerSelector, "controller-selector", "", "label selector of the UniversalControllers and UniversalDecorators this installation serves, e.g. team=payments (all when empty); two installations on one cluster must select disjoint sets")
	fs.BoolVar(&c.profiling, "profiling", false, "also serve Go's profiles on --metrics-addr at /debug/pprof/")
	if c.roles.applier || c.roles.watcher {
		fs.StringVar(&c.replicaID, "replica-id", os.Getenv("POD_NAME"), "the replica's name, kept across restarts, so that a restarted applier or watcher shard takes its partitions back at once (default $POD_NAME; uc run: kept in --data-dir). Never the same for two live replicas")
		fs.BoolVar(&c.shardWatchers, "shard-watchers", false, "share the parents among the watcher replicas by partition: each holds some partitions and watches only their objects, which the appliers label with universalcontroller.dev/partition (instead of one leader); set it on every watcher and applier of the installation")
	}
	if c.roles.watcher {
		// uc run is one process: no election unless asked; uc watcher
		// replicas elect one active watcher.
		fs.BoolVar(&c.leaderElect, "leader-elect", !c.embedded, "run the watcher only while holding the uc-watcher Lease")
		fs.StringVar(&c.leaseNamespace, "leader-elect-namespace", envOr("POD_NAMESPACE", "default"), "namespace of the watchers' Lease")
		fs.StringVar(&c.leaseName, "leader-elect-name", "uc-watcher", "name of the watchers' Lease; each installation in one namespace needs its own")
	}
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
