package testbed

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// objects are ConfigMaps and Secrets by namespace/name.
type objects struct {
	configMaps map[string]*corev1.ConfigMap
	secrets    map[string]*corev1.Secret
}

func (o objects) ConfigMap(namespace, name string) (*corev1.ConfigMap, error) {
	if cm, ok := o.configMaps[namespace+"/"+name]; ok {
		return cm.DeepCopy(), nil
	}
	return nil, fmt.Errorf("no ConfigMap %s/%s", namespace, name)
}

func (o objects) Secret(namespace, name string) (*corev1.Secret, error) {
	if s, ok := o.secrets[namespace+"/"+name]; ok {
		return s.DeepCopy(), nil
	}
	return nil, fmt.Errorf("no Secret %s/%s", namespace, name)
}

var testObjects = objects{
	configMaps: map[string]*corev1.ConfigMap{
		"uc-system/config": {Data: map[string]string{"URL": "nats://nats:4222", "LEVEL": "info"}},
		"uc-system/files":  {Data: map[string]string{"a.conf": "include /etc/app/b.conf", "b.conf": "data /var/lib/app"}},
	},
	secrets: map[string]*corev1.Secret{
		"uc-system/passwords": {Data: map[string][]byte{"PW": []byte("from-data")}, StringData: map[string]string{"OTHER": "from-stringdata"}},
	},
}

func TestExpandVars(t *testing.T) {
	vars := map[string]string{"A": "1", "B_2": "two"}
	for _, tc := range []struct{ in, want string }{
		{"$(A)", "1"},
		{"--x=$(A)-$(B_2)", "--x=1-two"},
		{"$(UNDEFINED)", "$(UNDEFINED)"},
		{"$$(A)", "$(A)"},
		{"cost $$5", "cost $5"},
		{"$A", "$A"},
		{"$(A", "$(A"},
		{"", ""},
	} {
		if got := ExpandVars([]string{tc.in}, vars)[0]; got != tc.want {
			t.Errorf("ExpandVars(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestContainerEnv(t *testing.T) {
	pod := Pod{Namespace: "uc-system", Name: "uc-applier-1", Spec: corev1.PodSpec{ServiceAccountName: "uc-applier"}}
	field := func(name, path string) corev1.EnvVar {
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
	}
	secretKey := func(name, secret, key string) corev1.EnvVar {
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: key}}}
	}
	for _, tc := range []struct {
		name    string
		c       corev1.Container
		want    map[string]string
		wantErr string
	}{
		{name: "envFrom, then env in order", c: corev1.Container{
			EnvFrom: []corev1.EnvFromSource{
				{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "config"}}},
				{Prefix: "S_", SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "passwords"}}},
			},
			Env: []corev1.EnvVar{
				{Name: "LEVEL", Value: "debug"},
				{Name: "ADDR", Value: "$(URL)/$(LATER)"},
				{Name: "LATER", Value: "x"},
				secretKey("PASSWORD", "passwords", "PW"),
				field("POD", "metadata.name"),
				field("NS", "metadata.namespace"),
				field("SA", "spec.serviceAccountName"),
				field("NODE", "spec.nodeName"),
				field("IP", "status.podIP"),
			},
		}, want: map[string]string{
			"URL": "nats://nats:4222", "LEVEL": "debug", "S_PW": "from-data", "S_OTHER": "from-stringdata",
			"ADDR": "nats://nats:4222/$(LATER)", "LATER": "x", "PASSWORD": "from-data",
			"POD": "uc-applier-1", "NS": "uc-system", "SA": "uc-applier", "NODE": NodeName, "IP": "127.0.0.1",
		}},
		{name: "missing ConfigMap", c: corev1.Container{EnvFrom: []corev1.EnvFromSource{
			{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "nope"}}},
		}}, wantErr: "no ConfigMap uc-system/nope"},
		{name: "missing Secret key", c: corev1.Container{Env: []corev1.EnvVar{secretKey("P", "passwords", "NOPE")}},
			wantErr: "Secret passwords has no key NOPE"},
		{name: "unsimulated field", c: corev1.Container{Env: []corev1.EnvVar{field("UID", "metadata.uid")}},
			wantErr: "field metadata.uid is not simulated"},
		{name: "unsimulated source", c: corev1.Container{Env: []corev1.EnvVar{{Name: "CPU", ValueFrom: &corev1.EnvVarSource{
			ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.cpu"}}}}},
			wantErr: "only values, fieldRefs and secretKeyRefs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ContainerEnv(testObjects, pod, tc.c)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(got, tc.want) {
				t.Errorf("environment\n%v\nwant\n%v", got, tc.want)
			}
		})
	}
}

func TestMountVolumes(t *testing.T) {
	dir := t.TempDir()
	pod := Pod{Namespace: "uc-system", Name: "app-0", Spec: corev1.PodSpec{Volumes: []corev1.Volume{
		{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "files"}}}},
		{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "unmounted", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "nope"}}}},
	}}}
	c := corev1.Container{VolumeMounts: []corev1.VolumeMount{
		{Name: "data", MountPath: "/var/lib/app"},
		{Name: "config", MountPath: "/etc/app"},
	}}
	rewrite, err := MountVolumes(testObjects, pod, c, dir)
	if err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]string{
		"config/a.conf": "include " + filepath.Join(dir, "config") + "/b.conf",
		"config/b.conf": "data " + filepath.Join(dir, "data"),
	} {
		b, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil || string(b) != want {
			t.Errorf("%s holds %q (err %v), want %q", file, b, err, want)
		}
	}
	if entries, err := os.ReadDir(filepath.Join(dir, "data")); err != nil || len(entries) != 0 {
		t.Errorf("the emptyDir volume: %v (err %v), want an empty directory", entries, err)
	}
	if got, want := rewrite("--config=/etc/app/a.conf"), "--config="+filepath.Join(dir, "config", "a.conf"); got != want {
		t.Errorf("rewrite = %q, want %q", got, want)
	}
	// The longest mount path is rewritten first.
	nested := corev1.Container{VolumeMounts: []corev1.VolumeMount{{Name: "outer", MountPath: "/a"}, {Name: "inner", MountPath: "/a/b"}}}
	rewrite, err = MountVolumes(objects{}, Pod{}, nested, dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := rewrite("/a/b/f /a/f"), filepath.Join(dir, "inner", "f")+" "+filepath.Join(dir, "outer", "f"); got != want {
		t.Errorf("rewrite = %q, want %q", got, want)
	}
}

func TestProbePaths(t *testing.T) {
	probe := func(path string) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path}}}
	}
	c := corev1.Container{StartupProbe: probe("/start"), ReadinessProbe: probe("/readyz"),
		LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{}}}}
	if got := ProbePaths(c); !slices.Equal(got, []string{"/start", "/readyz"}) {
		t.Errorf("ProbePaths = %q, want the HTTP probes' paths", got)
	}
}

// TestContainerRestarts: a container gets exactly its environment, and is
// restarted after an exit Restartable accepts, up to MaxRestarts; any
// other exit is an error.
func TestContainerRestarts(t *testing.T) {
	sh := "/bin/sh"
	for _, tc := range []struct {
		name        string
		script      string
		restartable func(string) bool
		restarts    int    // how many Check makes before it fails
		wantLog     string // in the log
	}{
		{"exits for good", `echo "A=$A HOME=$HOME"; exit 3`, nil, 0, "A=1 HOME=\n"},
		{"restarted", `echo lost the lease; exit 1`, func(run string) bool { return strings.Contains(run, "lost the lease") }, MaxRestarts, "lost the lease"},
		{"restarted once", `if [ -e once ]; then echo crash; exit 1; fi; touch once; echo lost the lease; exit 1`,
			func(run string) bool { return strings.Contains(run, "lost the lease") }, 1, "crash"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			c, err := StartContainer(ContainerConfig{Name: "c", Dir: dir, Bin: sh, Args: []string{"-c", "cd " + dir + "; " + tc.script},
				Env: map[string]string{"A": "1"}, Restartable: tc.restartable, Logf: t.Logf})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Stop(time.Second) })
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			var exit error
			if err := poll(ctx, "the container's last exit", func(context.Context) error {
				if err := c.Check(); err != nil && !errors.Is(err, ErrRestarted) {
					exit = err
					return nil
				}
				return fmt.Errorf("running after %d restarts", c.Restarts())
			}); err != nil {
				t.Fatal(err)
			}
			if c.Restarts() != tc.restarts {
				t.Errorf("failed after %d restarts, want %d: %v", c.Restarts(), tc.restarts, exit)
			}
			if log := c.Log(); !strings.Contains(log, tc.wantLog) {
				t.Errorf("log %q lacks %q", log, tc.wantLog)
			}
		})
	}
}
