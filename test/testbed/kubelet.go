package testbed

// The test bed has no kubelet: kwok only pretends that pods run. A test
// that runs a workload of real manifests (uc's Deployments, the NATS
// StatefulSet of deploy/) runs its container as a local process, given
// what the kubelet would give it: ContainerEnv resolves its environment,
// MountVolumes makes each of its volumes a directory, and StartContainer
// runs its binary with exactly that environment, restarting it as
// restartPolicy Always would when it exits in a way the test expects.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// PodObjects finds the ConfigMaps and Secrets a pod refers to, in its
// containers' envFrom and env and in its volumes: the objects of a set of
// manifests, or of a cluster.
type PodObjects interface {
	ConfigMap(namespace, name string) (*corev1.ConfigMap, error)
	Secret(namespace, name string) (*corev1.Secret, error)
}

// Pod is one pod of a workload, as the kubelet runs it: its namespace and
// name (a Deployment's uc-applier-0, a StatefulSet's nats-1) and the spec
// of the workload's pod template.
type Pod struct {
	Namespace, Name string
	Spec            corev1.PodSpec
}

// field is the value of a downward API field path for the pod on the test
// bed: it runs on the loopback interface of the one node.
func (p Pod) field(path string) (string, bool) {
	v, ok := map[string]string{
		"metadata.name":           p.Name,
		"metadata.namespace":      p.Namespace,
		"spec.serviceAccountName": p.Spec.ServiceAccountName,
		"spec.nodeName":           NodeName,
		"status.podIP":            "127.0.0.1",
		"status.hostIP":           "127.0.0.1",
	}[path]
	return v, ok
}

// ContainerEnv is container c's environment as the kubelet sets it in pod:
// the data of its envFrom ConfigMaps and Secrets (with their prefix), then
// its env in order, with $(VAR) references to the variables before it
// expanded, and values from Secret keys and from the downward API. Other
// sources (resourceFieldRef, a ConfigMap key, optional references) are an
// error: the manifests it runs do not use them.
func ContainerEnv(objs PodObjects, pod Pod, c corev1.Container) (map[string]string, error) {
	vars := map[string]string{}
	for _, from := range c.EnvFrom {
		var data map[string]string
		switch {
		case from.ConfigMapRef != nil:
			cm, err := objs.ConfigMap(pod.Namespace, from.ConfigMapRef.Name)
			if err != nil {
				return nil, fmt.Errorf("%s: envFrom: %w", pod.Name, err)
			}
			data = cm.Data
		case from.SecretRef != nil:
			s, err := objs.Secret(pod.Namespace, from.SecretRef.Name)
			if err != nil {
				return nil, fmt.Errorf("%s: envFrom: %w", pod.Name, err)
			}
			data = secretData(s)
		default:
			return nil, fmt.Errorf("%s: envFrom other than a ConfigMap or a Secret", pod.Name)
		}
		for k, v := range data {
			vars[from.Prefix+k] = v
		}
	}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			vars[e.Name] = ExpandVars([]string{e.Value}, vars)[0]
		case e.ValueFrom.SecretKeyRef != nil:
			ref := e.ValueFrom.SecretKeyRef
			s, err := objs.Secret(pod.Namespace, ref.Name)
			if err != nil {
				return nil, fmt.Errorf("%s: env %s: %w", pod.Name, e.Name, err)
			}
			v, ok := secretData(s)[ref.Key]
			if !ok {
				return nil, fmt.Errorf("%s: env %s: Secret %s has no key %s", pod.Name, e.Name, ref.Name, ref.Key)
			}
			vars[e.Name] = v
		case e.ValueFrom.FieldRef != nil:
			v, ok := pod.field(e.ValueFrom.FieldRef.FieldPath)
			if !ok {
				return nil, fmt.Errorf("%s: env %s: field %s is not simulated", pod.Name, e.Name, e.ValueFrom.FieldRef.FieldPath)
			}
			vars[e.Name] = v
		default:
			return nil, fmt.Errorf("%s: env %s: only values, fieldRefs and secretKeyRefs are simulated", pod.Name, e.Name)
		}
	}
	return vars, nil
}

// secretData is a Secret's data as strings, stringData over data (as the
// API server merges them when the Secret is written).
func secretData(s *corev1.Secret) map[string]string {
	data := map[string]string{}
	for k, v := range s.Data {
		data[k] = string(v)
	}
	maps.Copy(data, s.StringData)
	return data
}

var varRef = regexp.MustCompile(`\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// ExpandVars expands $(VAR) in each string as the kubelet does in a
// container's command, args and env values: a variable of vars is
// replaced by its value, $$ is a $, and anything else stays as it is.
func ExpandVars(in []string, vars map[string]string) []string {
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = varRef.ReplaceAllStringFunc(s, func(ref string) string {
			if ref == "$$" {
				return "$"
			}
			if v, ok := vars[ref[2:len(ref)-1]]; ok {
				return v
			}
			return ref
		})
	}
	return out
}

// MountVolumes makes each volume container c mounts a directory
// dir/<volume>, holding the files of the volume's ConfigMap or Secret if
// it is one (its items only, if it lists some; other volumes start empty).
// A missing ConfigMap or Secret fails, naming it, as the kubelet's mount
// does. A process cannot see them at their mount paths, so the returned
// rewrite replaces each mount path in a string by its directory (the
// longest mount path first): MountVolumes applies it to the ConfigMaps'
// files, and the caller to the container's args.
func MountVolumes(objs PodObjects, pod Pod, c corev1.Container, dir string) (rewrite func(string) string, err error) {
	var mounts [][2]string // mount path, directory
	for _, vm := range c.VolumeMounts {
		vdir := filepath.Join(dir, vm.Name)
		if err := os.MkdirAll(vdir, 0o755); err != nil {
			return nil, err
		}
		mounts = append(mounts, [2]string{vm.MountPath, vdir})
	}
	slices.SortFunc(mounts, func(a, b [2]string) int { return len(b[0]) - len(a[0]) })
	rewrite = func(s string) string {
		for _, m := range mounts {
			s = strings.ReplaceAll(s, m[0], m[1])
		}
		return s
	}
	for _, v := range pod.Spec.Volumes {
		if !slices.ContainsFunc(c.VolumeMounts, func(vm corev1.VolumeMount) bool { return vm.Name == v.Name }) {
			continue
		}
		var files map[string]string
		var items []corev1.KeyToPath
		switch {
		case v.ConfigMap != nil:
			cm, err := objs.ConfigMap(pod.Namespace, v.ConfigMap.Name)
			if err != nil {
				return nil, fmt.Errorf("%s: volume %s: %w", pod.Name, v.Name, err)
			}
			files, items = maps.Clone(cm.Data), v.ConfigMap.Items
			for file, content := range files {
				files[file] = rewrite(content)
			}
		case v.Secret != nil:
			sec, err := objs.Secret(pod.Namespace, v.Secret.SecretName)
			if err != nil {
				return nil, fmt.Errorf("%s: volume %s: %w", pod.Name, v.Name, err)
			}
			files, items = secretData(sec), v.Secret.Items
		default:
			continue
		}
		if err := writeVolume(filepath.Join(dir, v.Name), files, items); err != nil {
			return nil, fmt.Errorf("%s: volume %s: %w", pod.Name, v.Name, err)
		}
	}
	return rewrite, nil
}

// writeVolume writes a ConfigMap's or Secret's files into dir: every key,
// or only items, each to its path.
func writeVolume(dir string, files map[string]string, items []corev1.KeyToPath) error {
	paths := map[string]string{}
	for k := range files {
		paths[k] = k
	}
	if len(items) > 0 {
		paths = map[string]string{}
		for _, it := range items {
			if _, ok := files[it.Key]; !ok {
				return fmt.Errorf("no key %s", it.Key)
			}
			paths[it.Key] = it.Path
		}
	}
	for k, path := range paths {
		if err := os.WriteFile(filepath.Join(dir, path), []byte(files[k]), 0o600); err != nil {
			return err
		}
	}
	return nil
}

// ProbePaths are the paths of container c's HTTP probes (startup,
// liveness, readiness).
func ProbePaths(c corev1.Container) []string {
	var paths []string
	for _, p := range []*corev1.Probe{c.StartupProbe, c.LivenessProbe, c.ReadinessProbe} {
		if p != nil && p.HTTPGet != nil {
			paths = append(paths, p.HTTPGet.Path)
		}
	}
	return paths
}

// ContainerConfig says what StartContainer runs.
type ContainerConfig struct {
	// Name names the process (the pod's name); its log is Dir/Name.log.
	Name, Dir string
	// Bin is the binary the container's image runs, with Args.
	Bin  string
	Args []string
	// Env is the process's whole environment: nothing of the test's is
	// passed on.
	Env map[string]string
	// Probes are the URLs of its HTTP probes on the test bed's addresses,
	// which Ready asks.
	Probes []string
	// Scrapes are URLs Ready asks too, as a scraper would: with
	// ScrapeToken as bearer token (a /metrics served to authorized
	// clients only), over TLS without verifying the certificate.
	Scrapes     []string
	ScrapeToken string
	// Restartable says whether an exit is one the kubelet's restart
	// recovers from, given the log of the run that ended (nil: none is);
	// Check fails on any other exit.
	Restartable func(run string) bool
	// Logf is told of each restart; nil: nobody is.
	Logf func(format string, args ...any)
}

// MaxRestarts bounds how often Check restarts a container.
const MaxRestarts = 10

// ErrRestarted is what Check's error wraps when it restarted the container.
var ErrRestarted = errors.New("restarted")

// Container is a container run as a local process by StartContainer.
type Container struct {
	cfg       ContainerConfig
	log       string
	proc      *Process
	logOffset int64 // where the current run's log starts
	restarts  int
}

// StartContainer starts cfg.Bin with cfg.Args and exactly cfg.Env as its
// environment (env -i), appending its output to its log.
func StartContainer(cfg ContainerConfig) (*Container, error) {
	c := &Container{cfg: cfg, log: filepath.Join(cfg.Dir, cfg.Name+".log")}
	return c, c.start()
}

func (c *Container) start() error {
	envBin, err := exec.LookPath("env")
	if err != nil {
		return err
	}
	if st, err := os.Stat(c.log); err == nil {
		c.logOffset = st.Size()
	}
	c.proc, err = StartProcess(c.cfg.Name, envBin, c.log, c.Command()...)
	return err
}

// Command is the command line the container runs: env -i, its
// environment, its binary and args.
func (c *Container) Command() []string {
	cmd := []string{"-i"}
	for _, k := range slices.Sorted(maps.Keys(c.cfg.Env)) {
		cmd = append(cmd, k+"="+c.cfg.Env[k])
	}
	return append(append(cmd, c.cfg.Bin), c.cfg.Args...)
}

// Name is the container's process name, ContainerConfig.Name.
func (c *Container) Name() string { return c.cfg.Name }

// Restarts is how often Check restarted the container.
func (c *Container) Restarts() int { return c.restarts }

// Log is the container's whole log, of every run.
func (c *Container) Log() string {
	b, _ := os.ReadFile(c.log)
	return string(b)
}

// Check returns nil while the container runs. When it has exited in a way
// ContainerConfig.Restartable accepts, Check starts it again and returns an
// error wrapping ErrRestarted; on any other exit, or after MaxRestarts, it
// returns the exit with the log of the run that ended.
func (c *Container) Check() error {
	exit := c.proc.Exited()
	if exit == nil {
		return nil
	}
	log := c.Log()
	run := log[min(int(c.logOffset), len(log)):]
	if c.cfg.Restartable == nil || !c.cfg.Restartable(run) || c.restarts >= MaxRestarts {
		return fmt.Errorf("%w after %d restarts:\n%s", exit, c.restarts, run)
	}
	c.restarts++
	if c.cfg.Logf != nil {
		lines := strings.Split(strings.TrimSpace(run), "\n")
		c.cfg.Logf("%s exited (%s); restarting it as the kubelet would (restart %d)", c.cfg.Name, lines[len(lines)-1], c.restarts)
	}
	if err := c.start(); err != nil {
		return err
	}
	return fmt.Errorf("%s %w", c.cfg.Name, ErrRestarted)
}

// probeTimeout bounds one probe's request, as a probe's timeoutSeconds.
const probeTimeout = 2 * time.Second

// Ready returns nil if every probe and scrape of the container answers 200.
func (c *Container) Ready(ctx context.Context) error {
	check := func(u, token string) error {
		pctx, cancel := context.WithTimeout(ctx, probeTimeout)
		defer cancel()
		if err := httpCheck(httpClient(nil), u, token)(pctx); err != nil {
			return fmt.Errorf("%s: %w", c.cfg.Name, err)
		}
		return nil
	}
	for _, u := range c.cfg.Probes {
		if err := check(u, ""); err != nil {
			return err
		}
	}
	for _, u := range c.cfg.Scrapes {
		if err := check(u, c.cfg.ScrapeToken); err != nil {
			return err
		}
	}
	return nil
}

// Stop stops the container as Process.Stop does.
func (c *Container) Stop(grace time.Duration) { c.proc.Stop(grace) }

// RunContainer starts a container for the duration of t, failing t if it
// does not start. When t ends it stops the container and, if t failed,
// logs its command and the last lines of its log.
func RunContainer(t testing.TB, cfg ContainerConfig) *Container {
	t.Helper()
	c, err := StartContainer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Stop(stopGrace)
		if t.Failed() {
			t.Logf("--- %s: env %s\n--- last lines of %s ---\n%s", cfg.Name, strings.Join(c.Command(), " "), c.log, tail(c.log, 60))
		}
	})
	return c
}

// ServiceAccountKubeconfig writes to path a kubeconfig for the API server
// with a token of the ServiceAccount namespace/name, valid for an hour:
// what a pod running as it has in-cluster.
func (b *Bed) ServiceAccountKubeconfig(ctx context.Context, namespace, name, path string) error {
	client, err := kubernetes.NewForConfig(b.RESTConfig())
	if err != nil {
		return err
	}
	expiry := int64(3600)
	tok, err := client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("token of ServiceAccount %s/%s: %w", namespace, name, err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["bed"] = &clientcmdapi.Cluster{Server: b.apiURL, CertificateAuthorityData: b.restConfig.CAData}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: tok.Status.Token}
	cfg.Contexts["bed"] = &clientcmdapi.Context{Cluster: "bed", AuthInfo: name}
	cfg.CurrentContext = "bed"
	return clientcmd.WriteToFile(*cfg, path)
}
