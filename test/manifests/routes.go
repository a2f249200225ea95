package manifests

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	appsv1 "k8s.io/api/apps/v1"

	"universalcontroller.dev/uc/test/testbed"
)

// CheckRoutes checks the routes of a NATS StatefulSet's servers as conf,
// its nats.conf parsed as the first Pod's server parses it
// (StatefulSetNATSConf), configures them: the cluster block requires a
// user and a password of the servers that route to it (authorization),
// and routes to every server of the StatefulSet through its headless
// Service, on the container port "cluster", with that user and password.
func CheckRoutes(t testing.TB, conf map[string]any, sts *appsv1.StatefulSet) {
	t.Helper()
	cluster, _ := conf["cluster"].(map[string]any)
	auth, _ := cluster["authorization"].(map[string]any)
	user, _ := auth["user"].(string)
	password, _ := auth["password"].(string)
	if user == "" || password == "" {
		t.Errorf("nats.conf: cluster authorization %v; want a user and a password, without which anything reaching the route port joins the cluster", auth)
	}
	var port int32
	for _, p := range sts.Spec.Template.Spec.Containers[0].Ports {
		if p.Name == "cluster" {
			port = p.ContainerPort
		}
	}
	var want, routes []string
	for i := range *sts.Spec.Replicas {
		want = append(want, fmt.Sprintf("nats://%s:%s@%s-%d.%s:%d", user, password, sts.Name, i, sts.Spec.ServiceName, port))
	}
	if rs, ok := cluster["routes"].([]any); ok {
		for _, r := range rs {
			routes = append(routes, fmt.Sprint(r))
		}
	}
	if !slices.Equal(routes, want) {
		t.Errorf("nats.conf: routes %q, want %q", routes, want)
	}
}

// CheckRouteAuth runs servers of a NATS StatefulSet of the set
// in-process, each configured as its Pod's server is (the nats.conf of
// the ConfigMaps it mounts, read with the environment the Pod gets), on
// loopback and free ports, without JetStream: the server of Pod 1 must
// join the server of Pod 0 through its route to Pod 0, and a server that
// routes to Pod 0's without the route credentials, or with a wrong
// password, must be refused. It sets the environment of t.
func CheckRouteAuth(t testing.TB, s Set, sts *appsv1.StatefulSet) {
	t.Helper()
	objs := WithNATSTLS(t, s, sts)
	first := natsServerOptions(t, objs, sts, 0)
	first.Routes = nil
	srv0 := startNATS(t, first)
	addr := srv0.ClusterAddr().String()

	// Pod 1's server, with its route to Pod 0's.
	second := natsServerOptions(t, objs, sts, 1)
	i := slices.IndexFunc(second.Routes, func(u *url.URL) bool {
		return strings.HasPrefix(u.Hostname(), fmt.Sprintf("%s-0.", sts.Name))
	})
	if i < 0 {
		t.Fatalf("Pod %s-1's nats.conf has no route to %s-0: %v", sts.Name, sts.Name, second.Routes)
	}
	route := *second.Routes[i]
	route.Host = addr
	second.Routes = []*url.URL{&route}

	// Servers that do not know the route password; everything else is as
	// the Pods' (the cluster's name too).
	rogue := func(user *url.Userinfo) *server.Server {
		o := natsServerOptions(t, objs, sts, 2)
		o.Cluster.Username, o.Cluster.Password = "", ""
		o.Routes = []*url.URL{{Scheme: "nats", User: user, Host: addr}}
		return startNATS(t, o)
	}
	// Started at once: had the rogues been let in, they would be by the
	// time the second server is.
	srv1 := startNATS(t, second)
	rogues := map[string]*server.Server{
		"without credentials":   rogue(nil),
		"with a wrong password": rogue(url.UserPassword(route.User.Username(), "wrong")),
	}
	deadline := time.Now().Add(30 * time.Second)
	for srv0.NumRoutes() == 0 || srv1.NumRoutes() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the server of %s-1 did not join %s-0's with its route (%s): %d, %d routes", sts.Name, sts.Name, second.Routes[0].Redacted(), srv1.NumRoutes(), srv0.NumRoutes())
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(time.Second)
	for what, r := range rogues {
		if n := r.NumRoutes(); n != 0 {
			t.Errorf("a server routing to %s-0's %s joined the cluster (%d routes)", sts.Name, what, n)
		}
	}
}

// natsServerOptions are the options of the server of the i-th Pod of a
// NATS StatefulSet, from its nats.conf and environment in its volumes
// (MountNATSPod), on loopback and free ports, without monitoring,
// JetStream or a pid file.
func natsServerOptions(t testing.TB, objs testbed.PodObjects, sts *appsv1.StatefulSet, i int) *server.Options {
	t.Helper()
	p := MountNATSPod(t, objs, sts, i, t.TempDir())
	for k, v := range p.Env {
		t.Setenv(k, v)
	}
	o, err := server.ProcessConfigFile(p.Conf)
	if err != nil {
		t.Fatalf("%s: nats.conf: %v", p.Name, err)
	}
	o.ServerName = p.Name
	o.Host, o.Port = "127.0.0.1", server.RANDOM_PORT
	o.Cluster.Host, o.Cluster.Port = "127.0.0.1", server.RANDOM_PORT
	o.HTTPPort, o.PidFile = 0, ""
	o.JetStream, o.StoreDir = false, t.TempDir()
	o.NoSigs, o.NoLog = true, true
	return o
}

// startNATS starts a NATS server until t ends.
func startNATS(t testing.TB, o *server.Options) *server.Server {
	t.Helper()
	srv, err := server.NewServer(o)
	if err != nil {
		t.Fatalf("%s: %v", o.ServerName, err)
	}
	srv.Start()
	t.Cleanup(srv.Shutdown)
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatalf("%s did not start", o.ServerName)
	}
	return srv
}
