package testbed

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"k8s.io/client-go/rest"
)

// Client rate limits of the admin config and of the controllers, high
// enough that benchmarks measure the code under test, not client throttling.
const (
	clientQPS   = 200
	clientBurst = 400
)

// controllers are the kube-controller-manager controllers the test bed
// runs: enough for workloads, garbage collection, namespace deletion, and
// PersistentVolumeClaims bound to PersistentVolumes a test creates.
const controllers = "garbagecollector,namespace,deployment,replicaset,statefulset,job,serviceaccount,serviceaccount-token," +
	"persistentvolume-binder-controller,persistentvolume-protection-controller,persistentvolumeclaim-protection-controller"

// startControlPlane starts etcd, kube-apiserver, kube-controller-manager and
// kube-scheduler and waits until they are healthy.
func (b *Bed) startControlPlane(ctx context.Context) error {
	pki, err := writePKI(filepath.Join(b.dir, "pki"))
	if err != nil {
		return err
	}
	b.pki = pki
	etcdURL, err := b.startEtcd(ctx)
	if err != nil {
		return err
	}
	if err := b.startAPIServer(ctx, etcdURL); err != nil {
		return err
	}
	return b.startControllers(ctx)
}

func (b *Bed) startEtcd(ctx context.Context) (string, error) {
	ports, err := FreePorts(2)
	if err != nil {
		return "", err
	}
	clientURL, peerURL := loopbackURL("http", ports[0]), loopbackURL("http", ports[1])
	p, err := b.launch("etcd",
		"--data-dir="+filepath.Join(b.dir, "etcd"),
		"--listen-client-urls="+clientURL,
		"--advertise-client-urls="+clientURL,
		"--listen-peer-urls="+peerURL,
		"--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=default="+peerURL,
		"--unsafe-no-fsync",
		// The default 2 GiB fills at the bench's 50,000 parents × 5 (the
		// floor's objects and uc's, and the revisions the apiserver has not
		// compacted yet); etcd then refuses every write.
		"--quota-backend-bytes="+strconv.Itoa(8<<30),
		"--log-level=warn",
	)
	if err != nil {
		return "", err
	}
	return clientURL, b.waitFor(ctx, "etcd", httpCheck(httpClient(nil), clientURL+"/health", ""), p)
}

func (b *Bed) startAPIServer(ctx context.Context, etcdURL string) error {
	port, err := FreePort()
	if err != nil {
		return err
	}
	p, err := b.launch("kube-apiserver",
		"--etcd-servers="+etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(port),
		"--tls-cert-file="+b.pki.certFile,
		"--tls-private-key-file="+b.pki.keyFile,
		"--token-auth-file="+b.pki.tokenFile,
		"--authorization-mode=Node,RBAC",
		"--service-account-key-file="+b.pki.saKeyFile,
		"--service-account-signing-key-file="+b.pki.saKeyFile,
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-cluster-ip-range=10.96.0.0/16",
		"--allow-privileged=true",
		// The kubernetes Service cannot point at a loopback address.
		"--endpoint-reconciler-type=none",
	)
	if err != nil {
		return err
	}
	b.apiURL = loopbackURL("https", port)
	b.kubeconfig = filepath.Join(b.dir, "kubeconfig")
	if err := b.pki.writeKubeconfig(b.kubeconfig, b.apiURL); err != nil {
		return err
	}
	b.restConfig = &rest.Config{
		Host:            b.apiURL,
		BearerToken:     b.pki.token,
		TLSClientConfig: rest.TLSClientConfig{CAData: b.pki.caPEM},
		QPS:             clientQPS,
		Burst:           clientBurst,
	}
	return b.waitFor(ctx, "kube-apiserver", httpCheck(httpClient(b.pki.caPEM), b.apiURL+"/readyz", b.pki.token), p)
}

// startControllers starts kube-controller-manager and kube-scheduler side
// by side and waits for both.
func (b *Bed) startControllers(ctx context.Context) error {
	ports, err := FreePorts(2)
	if err != nil {
		return err
	}
	kcm, err := b.launch("kube-controller-manager", append(b.delegationFlags(ports[0]),
		"--kubeconfig="+b.kubeconfig,
		"--controllers="+controllers,
		"--service-account-private-key-file="+b.pki.saKeyFile,
		"--root-ca-file="+b.pki.caFile,
		"--use-service-account-credentials=false",
		"--leader-elect=false",
		"--kube-api-qps="+strconv.Itoa(clientQPS),
		"--kube-api-burst="+strconv.Itoa(clientBurst),
	)...)
	if err != nil {
		return err
	}
	config, err := b.writeSchedulerConfig()
	if err != nil {
		return err
	}
	sched, err := b.launch("kube-scheduler", append(b.delegationFlags(ports[1]), "--config="+config)...)
	if err != nil {
		return err
	}
	probe := httpClient(nil)
	if err := b.waitFor(ctx, "kube-controller-manager", httpCheck(probe, loopbackURL("https", ports[0])+"/healthz", ""), kcm); err != nil {
		return err
	}
	return b.waitFor(ctx, "kube-scheduler", httpCheck(probe, loopbackURL("https", ports[1])+"/readyz", ""), sched)
}

// delegationFlags makes a controller serve health and metrics on
// 127.0.0.1:port, authenticating and authorizing callers (such as the admin
// token) through the API server.
func (b *Bed) delegationFlags(port int) []string {
	return []string{
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--authentication-kubeconfig=" + b.kubeconfig,
		"--authorization-kubeconfig=" + b.kubeconfig,
	}
}

// writeSchedulerConfig writes a KubeSchedulerConfiguration; client rate
// limits are only configurable there without deprecated flags.
func (b *Bed) writeSchedulerConfig() (string, error) {
	path := filepath.Join(b.dir, "kube-scheduler.yaml")
	config := fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %q
  qps: %d
  burst: %d
leaderElection:
  leaderElect: false
`, b.kubeconfig, clientQPS, clientBurst)
	if err := os.WriteFile(path, []byte(config), 0o644); err != nil {
		return "", fmt.Errorf("write scheduler config: %w", err)
	}
	return path, nil
}
