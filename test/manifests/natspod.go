package manifests

import (
	"fmt"
	"maps"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"universalcontroller.dev/uc/internal/natsreload"
	"universalcontroller.dev/uc/internal/natstls"
	"universalcontroller.dev/uc/test/testbed"
)

// Objects are the objects a Pod refers to: a set's, and what an
// administrator's overlay changes: Secrets made beside it (the NATS
// servers' certificates), the NATS users (auth.conf) and more of their
// passwords.
type Objects struct {
	Set
	Secrets []*corev1.Secret
	// AuthConf, if not empty, replaces auth.conf in the ConfigMaps.
	AuthConf string
	// Passwords are added to the Secret of the users' passwords (the one
	// with UC_NATS_PASSWORD_* keys).
	Passwords map[string]string
	// TLS is the certificate of Secrets, if WithNATSTLS made it.
	TLS *NATSTLS
}

// ConfigMap is the set's, auth.conf replaced.
func (o Objects) ConfigMap(namespace, name string) (*corev1.ConfigMap, error) {
	cm, err := o.Set.ConfigMap(namespace, name)
	if _, ok := cm.Data["auth.conf"]; err == nil && ok && o.AuthConf != "" {
		cm.Data["auth.conf"] = o.AuthConf
	}
	return cm, err
}

// Secret is one of the Secrets made beside the set, or the set's, with
// the passwords added.
func (o Objects) Secret(namespace, name string) (*corev1.Secret, error) {
	for _, s := range o.Secrets {
		if s.Namespace == namespace && s.Name == name {
			return s.DeepCopy(), nil
		}
	}
	sec, err := o.Set.Secret(namespace, name)
	if err != nil {
		return nil, err
	}
	if slices.ContainsFunc(slices.Collect(maps.Keys(sec.Data)), func(k string) bool { return strings.HasPrefix(k, "UC_NATS_PASSWORD_") }) {
		for k, v := range o.Passwords {
			sec.Data[k] = []byte(v)
		}
	}
	return sec, nil
}

// NATSTLS is a CA and the NATS servers' certificate the CA signed.
type NATSTLS struct {
	CA         *natstls.CA
	CAPEM      []byte
	Cert, Key  []byte
	SecretName string
}

// NewNATSTLS makes a CA and a certificate for the servers of a NATS
// StatefulSet as `uc nats-certs` does (its Services' names), valid on
// loopback too (127.0.0.1), where the tests run the servers.
func NewNATSTLS(t testing.TB, sts *appsv1.StatefulSet, secretName string) *NATSTLS {
	t.Helper()
	ca, err := natstls.NewCA("test-nats-ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	caPEM, _, err := ca.PEM()
	if err != nil {
		t.Fatal(err)
	}
	service := strings.TrimSuffix(sts.Spec.ServiceName, "-headless")
	cert, key, err := ca.Issue(service, natstls.DNSNames(service, sts.Spec.ServiceName, sts.Namespace, "cluster.local"),
		[]net.IP{net.IPv4(127, 0, 0, 1)}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return &NATSTLS{CA: ca, CAPEM: caPEM, Cert: cert, Key: key, SecretName: secretName}
}

// Secret is the certificate as the Secret the servers mount, in
// cert-manager's layout.
func (n *NATSTLS) Secret(namespace string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: n.SecretName},
		Data:       map[string][]byte{"ca.crt": n.CAPEM, "tls.crt": n.Cert, "tls.key": n.Key},
	}
}

// TLSSecretName is the Secret of the NATS servers' certificate: the one the
// volume "tls" of the StatefulSet's Pods mounts.
func TLSSecretName(t testing.TB, sts *appsv1.StatefulSet) string {
	t.Helper()
	for _, v := range sts.Spec.Template.Spec.Volumes {
		if v.Name == "tls" && v.Secret != nil {
			return v.Secret.SecretName
		}
	}
	t.Fatalf("StatefulSet %s mounts no Secret as its volume tls", sts.Name)
	return ""
}

// WithNATSTLS is the set's objects with the NATS servers' certificate
// Secret made by NewNATSTLS, valid on loopback, over the set's if it has
// one.
func WithNATSTLS(t testing.TB, s Set, sts *appsv1.StatefulSet) Objects {
	t.Helper()
	name := TLSSecretName(t, sts)
	tls := NewNATSTLS(t, sts, name)
	return Objects{Set: s, Secrets: []*corev1.Secret{tls.Secret(sts.Namespace)}, TLS: tls}
}

// NATSPod is a Pod of a NATS StatefulSet, its volumes mounted into a
// directory and its init containers run.
type NATSPod struct {
	Name string
	// Conf is its nats.conf, in the directory of its volume.
	Conf string
	// Args are the server's arguments, mount paths rewritten, and Env its
	// environment.
	Args []string
	Env  map[string]string
	// Reloader is the configuration of its container running uc
	// nats-reloader, its paths rewritten.
	Reloader natsreload.Config
}

// MountNATSPod mounts the volumes of the i-th Pod of a NATS StatefulSet
// into dir, as the kubelet would (testbed.MountVolumes; a Secret missing
// fails t, naming it), and runs its init containers, uc nats-reloader
// --once, as uc runs them (its flags, natsreload), so that the server's
// nats.conf reads as in the Pod.
func MountNATSPod(t testing.TB, objs testbed.PodObjects, sts *appsv1.StatefulSet, i int, dir string) *NATSPod {
	t.Helper()
	spec := sts.Spec.Template.Spec
	pod := testbed.Pod{Namespace: sts.Namespace, Name: fmt.Sprintf("%s-%d", sts.Name, i), Spec: spec}
	p := &NATSPod{Name: pod.Name}
	for _, c := range slices.Concat(spec.InitContainers, spec.Containers) {
		rewrite, err := testbed.MountVolumes(objs, pod, c, dir)
		if err != nil {
			t.Fatal(err)
		}
		args := slices.Clone(c.Args)
		for j := range args {
			args[j] = rewrite(args[j])
		}
		switch {
		case slices.Equal(c.Command, []string{"nats-server"}):
			env, err := testbed.ContainerEnv(objs, pod, c)
			if err != nil {
				t.Fatal(err)
			}
			p.Env, p.Args = env, testbed.ExpandVars(args, env)
			for _, a := range p.Args {
				if conf, ok := strings.CutPrefix(a, "--config="); ok {
					p.Conf = conf
				}
			}
		case len(args) > 0 && args[0] == "nats-reloader":
			var cfg natsreload.Config
			fs := pflag.NewFlagSet(c.Name, pflag.ContinueOnError)
			cfg.RegisterFlags(fs)
			once := fs.Bool("once", false, "")
			if err := fs.Parse(args[1:]); err != nil {
				t.Fatalf("%s: container %s: %v", pod.Name, c.Name, err)
			}
			if !*once {
				p.Reloader = cfg
				continue
			}
			if _, err := cfg.Write(); err != nil {
				t.Fatalf("%s: init container %s: %v", pod.Name, c.Name, err)
			}
		}
	}
	if p.Conf == "" {
		t.Fatalf("%s: no nats-server container with --config", pod.Name)
	}
	if _, err := filepath.Rel(dir, p.Conf); err != nil || !strings.HasPrefix(p.Conf, dir) {
		t.Fatalf("%s: nats.conf %s is in none of its volumes", pod.Name, p.Conf)
	}
	return p
}
