package manifests

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	natsconf "github.com/nats-io/nats-server/v2/conf"
	"github.com/nats-io/nats.go"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"universalcontroller.dev/uc/internal/natsauth"
	"universalcontroller.dev/uc/internal/natstls"
	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/test/testbed"
)

// NATSServer is a server of a NATS StatefulSet run as a real nats-server
// process on loopback (StartNATSServers).
type NATSServer struct {
	Pod                               *NATSPod
	Dir                               string
	Container                         *testbed.Container
	ClientPort, ClusterPort, HTTPPort int
	// RouteUser is the user and password of its routes.
	RouteUser *url.Userinfo
	// routes are the route URLs of every server of the StatefulSet.
	routes []string
}

// routeURL is the URL of its route port, with its route credentials.
func (s *NATSServer) routeURL() string {
	return (&url.URL{Scheme: "nats", User: s.RouteUser, Host: fmt.Sprintf("127.0.0.1:%d", s.ClusterPort)}).String()
}

// URL is its client URL.
func (s *NATSServer) URL() string { return fmt.Sprintf("nats://127.0.0.1:%d", s.ClientPort) }

// Peers are the names of the servers it has a route with (its /routez).
func (s *NATSServer) Peers(ctx context.Context) (map[string]bool, error) {
	return routePeers(ctx, s.HTTPPort)
}

// routePeers are the names of the servers the server of the monitoring
// port has a route with.
func routePeers(ctx context.Context, httpPort int) (map[string]bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/routez", httpPort), nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var routez struct {
		Routes []struct {
			RemoteName string `json:"remote_name"`
		} `json:"routes"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&routez); err != nil {
		return nil, fmt.Errorf("routez: %w", err)
	}
	peers := map[string]bool{}
	for _, r := range routez.Routes {
		peers[r.RemoteName] = true
	}
	return peers, nil
}

// StartNATSServers runs the servers of a NATS StatefulSet as the kubelet
// would (testbed.RunContainer, the test bed's nats-server): each Pod's
// volumes mounted (MountNATSPod), its command, args and environment, only
// the addresses replaced by loopback's, and its routes to the others with
// their credentials (the Pod's); and waits until every probe answers and
// every server routes to every other.
func StartNATSServers(t testing.TB, objs testbed.PodObjects, sts *appsv1.StatefulSet, dir string) []*NATSServer {
	t.Helper()
	n := int(*sts.Spec.Replicas)
	ports, err := testbed.FreePorts(3 * n)
	if err != nil {
		t.Fatal(err)
	}
	var servers []*NATSServer
	for i := range n {
		s := &NATSServer{Dir: filepath.Join(dir, fmt.Sprintf("%s-%d", sts.Name, i)), ClientPort: ports[3*i], ClusterPort: ports[3*i+1], HTTPPort: ports[3*i+2]}
		s.Pod = MountNATSPod(t, objs, sts, i, s.Dir)
		s.RouteUser = routeUser(t, s.Pod, sts)
		servers = append(servers, s)
	}
	var routes []string
	for _, s := range servers {
		routes = append(routes, s.routeURL())
	}
	for _, s := range servers {
		s.routes = routes
		s.start(t, sts, dir)
	}
	err = wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, s := range servers {
			if err := s.Container.Check(); err != nil {
				return false, err
			}
			if s.Container.Ready(ctx) != nil {
				return false, nil
			}
			if peers, err := s.Peers(ctx); err != nil || len(peers) != n-1 {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("the %d servers of %s did not all start and route to each other: %v", n, sts.Name, err)
	}
	return servers
}

// start runs the server's Pod's nats-server on its ports, routing to
// every server of the StatefulSet, its log in dir.
func (s *NATSServer) start(t testing.TB, sts *appsv1.StatefulSet, dir string) {
	t.Helper()
	c := sts.Spec.Template.Spec.Containers[0]
	args := append(slices.Clip(s.Pod.Args),
		"--addr=127.0.0.1",
		fmt.Sprintf("--port=%d", s.ClientPort),
		fmt.Sprintf("--http_port=%d", s.HTTPPort),
		// With its credentials: a --cluster without them clears
		// the cluster authorization of nats.conf.
		"--cluster="+s.routeURL(),
		"--routes="+strings.Join(s.routes, ","))
	var probes []string
	for _, path := range testbed.ProbePaths(c) {
		probes = append(probes, fmt.Sprintf("http://127.0.0.1:%d%s", s.HTTPPort, path))
	}
	s.Container = testbed.RunContainer(t, testbed.ContainerConfig{Name: s.Pod.Name, Dir: dir,
		Bin: testbed.CachedBin("nats-server"), Args: args, Env: s.Pod.Env, Probes: probes})
}

// Roll replaces the server as a StatefulSet's rolling update replaces its
// Pod, by the Pod template of sts (a new revision) and objs: it stops the
// server (grace, the Pod's termination grace), mounts the new Pod's
// volumes over the old ones in its directory (its JetStream store kept, as
// its PersistentVolumeClaim is), starts it on the same ports and routes,
// and waits until every probe answers (the startup probe's /healthz: its
// streams caught up) and it routes to its peers again.
func (s *NATSServer) Roll(t testing.TB, objs testbed.PodObjects, sts *appsv1.StatefulSet, i int, grace time.Duration) {
	t.Helper()
	s.Container.Stop(grace)
	s.Pod = MountNATSPod(t, objs, sts, i, s.Dir)
	s.start(t, sts, filepath.Dir(s.Dir))
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := s.Container.Check(); err != nil {
			return false, err
		}
		if s.Container.Ready(ctx) != nil {
			return false, nil
		}
		peers, err := s.Peers(ctx)
		return err == nil && len(peers) == len(s.routes)-1, nil
	})
	if err != nil {
		t.Fatalf("%s, rolled, did not get ready and route to its peers: %v", s.Pod.Name, err)
	}
}

// routeUser is the user and password of a Pod's server's route to the
// first server, as its nats.conf reads it.
func routeUser(t testing.TB, p *NATSPod, sts *appsv1.StatefulSet) *url.Userinfo {
	t.Helper()
	for k, v := range p.Env {
		t.Setenv(k, v)
	}
	conf, err := natsconf.ParseFile(p.Conf)
	if err != nil {
		t.Fatalf("%s: nats.conf: %v", p.Name, err)
	}
	routes, _ := conf["cluster"].(map[string]any)["routes"].([]any)
	for _, r := range routes {
		u, err := url.Parse(fmt.Sprint(r))
		if err == nil && strings.HasPrefix(u.Hostname(), sts.Name+"-0.") {
			return u.User
		}
	}
	t.Fatalf("%s: no route to %s-0 in %v", p.Name, sts.Name, routes)
	return nil
}

// Rogue is a server that tries to join a NATS cluster, configured as the
// test says (its cluster block and route), without JetStream.
type Rogue struct {
	Name  string
	Route *url.URL
	// ClusterTLS is the tls block of its cluster configuration ("": none).
	ClusterTLS string
}

// StartRogue runs a rogue server as a nats-server process, in the cluster
// named cluster, with debug logs, and waits until it has tried its route
// twice: its first attempt over, refused or not. It returns the rogue's
// monitoring port.
func StartRogue(t testing.TB, r Rogue, cluster, dir string) (httpPort int) {
	t.Helper()
	ports, err := testbed.FreePorts(3)
	if err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, r.Name+".conf")
	text := fmt.Sprintf("cluster {\n  name: %q\n%s\n}\n", cluster, r.ClusterTLS)
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	c := testbed.RunContainer(t, testbed.ContainerConfig{Name: r.Name, Dir: dir, Bin: testbed.CachedBin("nats-server"), Args: []string{
		"--config=" + conf, "--server_name=" + r.Name, "--addr=127.0.0.1", "--debug",
		fmt.Sprintf("--port=%d", ports[0]), fmt.Sprintf("--http_port=%d", ports[1]),
		fmt.Sprintf("--cluster=nats://127.0.0.1:%d", ports[2]), "--routes=" + r.Route.String(),
	}})
	err = wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		if err := c.Check(); err != nil {
			return false, err
		}
		return strings.Count(c.Log(), "Trying to connect to route on") >= 2, nil
	})
	if err != nil {
		t.Fatalf("rogue server %s did not try its route twice: %v", r.Name, err)
	}
	return ports[1]
}

// CheckNATSTLS runs the servers of a NATS StatefulSet of the set
// (StartNATSServers) with a certificate of a test CA and the hook users
// of two controllers, foo and bar, and checks that the bus is closed: the
// servers join each other over mutual TLS with the route password; a
// server with a certificate of another CA, without a certificate, or
// without the password cannot join; a client without TLS is refused, a
// role's user connects over TLS verifying the servers with the CA; and
// foo's hook user still cannot read bar's subjects. It returns the
// servers and the objects they run from.
func CheckNATSTLS(t testing.TB, s Set, sts *appsv1.StatefulSet) ([]*NATSServer, Objects) {
	t.Helper()
	users, err := natsauth.Users(bus.DefaultPartitions, "foo", "bar")
	if err != nil {
		t.Fatal(err)
	}
	objs := WithNATSTLS(t, s, sts)
	objs.AuthConf = natsauth.Config(users)
	objs.Passwords = map[string]string{}
	for _, ctl := range []string{"foo", "bar"} {
		objs.Passwords[natsauth.PasswordVariable(natsauth.HookUser(ctl))] = "pw-" + ctl
	}
	dir := t.TempDir()
	servers := StartNATSServers(t, objs, sts, dir)
	first := servers[0]
	tlsDir := filepath.Join(first.Dir, "tls")

	// Rogues routing to the first server.
	other := NewNATSTLS(t, sts, "other")
	if err := os.WriteFile(filepath.Join(dir, "other.crt"), other.Cert, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "other.key"), other.Key, 0o600); err != nil {
		t.Fatal(err)
	}
	clusterTLS := func(cert, key string) string {
		return fmt.Sprintf("  tls {\n    cert_file: %q\n    key_file: %q\n    ca_file: %q\n    verify: true\n  }", cert, key, filepath.Join(tlsDir, "ca.crt"))
	}
	route := url.URL{Scheme: "nats", User: first.RouteUser, Host: fmt.Sprintf("127.0.0.1:%d", first.ClusterPort)}
	noPassword := route
	noPassword.User = nil
	cluster := clusterName(t, first.Pod)
	for _, r := range []Rogue{
		{Name: "rogue-other-ca", Route: &route, ClusterTLS: clusterTLS(filepath.Join(dir, "other.crt"), filepath.Join(dir, "other.key"))},
		{Name: "rogue-no-certificate", Route: &route},
		{Name: "rogue-no-password", Route: &noPassword, ClusterTLS: clusterTLS(filepath.Join(tlsDir, "tls.crt"), filepath.Join(tlsDir, "tls.key"))},
	} {
		httpPort := StartRogue(t, r, cluster, dir)
		peers, err := first.Peers(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		own, err := routePeers(t.Context(), httpPort)
		if err != nil {
			t.Fatal(err)
		}
		if peers[r.Name] || len(peers) != len(servers)-1 || len(own) != 0 {
			t.Errorf("%s joined the cluster: %s routes to %v, %s to %v", r.Name, first.Pod.Name, peers, r.Name, own)
		}
	}

	// Clients.
	passwords := filepath.Join(first.Dir, "passwords")
	watcher := bus.Connection{URL: first.URL(), InboxPrefix: natsauth.RoleInbox(natsauth.Watcher), User: natsauth.RoleUser(natsauth.Watcher), PasswordFile: filepath.Join(passwords, natsauth.PasswordVariable(natsauth.RoleUser(natsauth.Watcher)))}
	if nc, err := watcher.Connect("plain", slog.New(slog.DiscardHandler), nil); err == nil {
		nc.Close()
		t.Error("a client without TLS connected")
	}
	watcher.TLSCA = filepath.Join(tlsDir, "ca.crt")
	nc, err := watcher.Connect("watcher", slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatalf("uc-watcher over TLS: %v", err)
	}
	defer nc.Close()
	if err := nc.Flush(); err != nil || !nc.TLSRequired() {
		t.Errorf("uc-watcher over TLS: %v (TLS required: %t)", err, nc.TLSRequired())
	}

	// foo's hook user, over TLS, may read its own inbox, not bar's.
	refused := make(chan error, 4)
	foo := bus.Connection{URL: first.URL(), User: natsauth.HookUser("foo"), Password: "pw-foo", TLSCA: watcher.TLSCA, InboxPrefix: bus.HookInbox("foo")}
	fc, err := foo.Connect("hook-foo", slog.New(slog.DiscardHandler), func(err error) { refused <- err })
	if err != nil {
		t.Fatalf("hook-foo over TLS: %v", err)
	}
	defer fc.Close()
	own, others := bus.HookInbox("foo")+".x", bus.HookInbox("bar")+".x"
	for _, subject := range []string{own, others} {
		if _, err := fc.SubscribeSync(subject); err != nil {
			t.Fatal(err)
		}
	}
	if err := fc.Flush(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-refused:
		if !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(others)) {
			t.Errorf("hook-foo refused %v, want only its subscription to %s", err, others)
		}
	case <-time.After(10 * time.Second):
		t.Errorf("hook-foo subscribed to %s, bar's inbox", others)
	}
	select {
	case err := <-refused:
		t.Errorf("hook-foo refused again: %v", err)
	default:
	}
	return servers, objs
}

// clusterName is the cluster's name in a Pod's nats.conf.
func clusterName(t testing.TB, p *NATSPod) string {
	t.Helper()
	for k, v := range p.Env {
		t.Setenv(k, v)
	}
	conf, err := natsconf.ParseFile(p.Conf)
	if err != nil {
		t.Fatal(err)
	}
	name, _ := conf["cluster"].(map[string]any)["name"].(string)
	return name
}

// CheckNATSRotation rotates, on the first server of servers (CheckNATSTLS),
// the password of uc-watcher and the servers' certificate as the kubelet
// updates a mounted Secret (its files replaced at once), with the Pod's
// reloader running (natsreload, as its container runs it): the server
// reloads without a restart (its pid the same), refuses the old password
// and takes the new one, presents the new certificate, and a uc client
// connected with the old password connects again with the new one, read
// from its password file.
func CheckNATSRotation(t testing.TB, servers []*NATSServer, ca *natstls.CA) {
	t.Helper()
	s := servers[0]
	pidBefore, err := os.ReadFile(s.Pod.Reloader.PidFile)
	if err != nil {
		t.Fatal(err)
	}
	user := natsauth.RoleUser(natsauth.Watcher)
	serverFile := filepath.Join(s.Pod.Reloader.PasswordsDir, natsauth.PasswordVariable(user))
	old, err := os.ReadFile(serverFile)
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(s.Dir, "tls", "ca.crt")
	clientFile := filepath.Join(t.TempDir(), "password")
	writeAtOnce(t, clientFile, old)
	reconnected := make(chan struct{}, 8)
	client := bus.Connection{URL: s.URL(), User: user, PasswordFile: clientFile, TLSCA: caFile, InboxPrefix: natsauth.RoleInbox(natsauth.Watcher)}
	opts, err := client.Options()
	if err != nil {
		t.Fatal(err)
	}
	// This server only: the others still take the old password.
	nc, err := nats.Connect(client.URL, append(opts, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond),
		nats.IgnoreDiscoveredServers(), nats.ReconnectHandler(func(*nats.Conn) { reconnected <- struct{}{} }))...)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()

	// The reloader starts once the client is connected: a client still
	// connecting while the server reloads may be checked against either
	// configuration.
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Pod.Reloader.Run(ctx, slog.New(slog.NewTextHandler(testWriter{t}, nil))) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("reloader: %v", err)
		}
	})

	// Rotate: the server's password and certificate, then the client's
	// password (the kubelet updates each Pod's volumes in its own time).
	rotated := []byte("rotated-" + string(old))
	writeAtOnce(t, serverFile, rotated)
	cert, key, err := ca.Issue("renewed", nil, []net.IP{net.IPv4(127, 0, 0, 1)}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	writeAtOnce(t, filepath.Join(s.Dir, "tls", "tls.key"), key)
	writeAtOnce(t, filepath.Join(s.Dir, "tls", "tls.crt"), cert)

	connect := func(password []byte) error {
		c := bus.Connection{URL: s.URL(), User: user, Password: string(password), TLSCA: caFile}
		opts, err := c.Options()
		if err != nil {
			return err
		}
		// This server only: not one it tells of, which would take the old password.
		conn, err := nats.Connect(c.URL, append(opts, nats.NoReconnect(), nats.IgnoreDiscoveredServers())...)
		if err != nil {
			return err
		}
		defer conn.Close()
		state, err := conn.TLSConnectionState()
		if err != nil {
			return err
		}
		if cn := state.PeerCertificates[0].Subject.CommonName; cn != "renewed" {
			return fmt.Errorf("the server presents the certificate of %s", cn)
		}
		return nil
	}
	err = wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return connect(rotated) == nil, nil
	})
	if err != nil {
		t.Fatalf("the server did not take the rotated password and certificate: %v; its reloads:\n%s", connect(rotated), reloads(s))
	}
	if err := connect(old); err == nil || !strings.Contains(strings.ToLower(err.Error()), "authorization") {
		t.Errorf("the old password: %v, want an authorization violation; the server's reloads:\n%s", err, reloads(s))
	}
	if pid, _ := os.ReadFile(s.Pod.Reloader.PidFile); string(pid) != string(pidBefore) || s.Container.Restarts() != 0 || s.Container.Check() != nil {
		t.Errorf("the server restarted: pid %s, then %s; %d restarts", pidBefore, pid, s.Container.Restarts())
	}

	// The server disconnects the client of the old password, which is
	// refused again and again until its Pod's file is updated (a while
	// later: the kubelet syncs each Pod in its own time) but does not give
	// up (bus.Connection.Options), then connects with the new password.
	err = wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		if nc.IsClosed() {
			return false, errors.New("closed")
		}
		return nc.Status() == nats.RECONNECTING && nc.Stats().Reconnects >= 3, nil
	})
	if err != nil {
		t.Fatalf("the client of the old password: %v, %d attempts (last error %v), want disconnected, refused 3 times and trying again", nc.Status(), nc.Stats().Reconnects, nc.LastError())
	}
	select {
	case <-reconnected:
		t.Fatalf("the client connected again with the old password")
	default:
	}
	writeAtOnce(t, clientFile, rotated)
	select {
	case <-reconnected:
	case <-time.After(time.Minute):
		t.Fatalf("the client did not connect again with the rotated password (status %v, last error %v)", nc.Status(), nc.LastError())
	}
	if err := nc.Flush(); err != nil {
		t.Errorf("the client, reconnected: %v", err)
	}
}

// reloads are the lines of a server's log about reloading its
// configuration.
func reloads(s *NATSServer) string {
	var lines []string
	for line := range strings.Lines(s.Container.Log()) {
		if strings.Contains(strings.ToLower(line), "reload") {
			lines = append(lines, line)
		}
	}
	return strings.Join(lines, "")
}

// writeAtOnce replaces a file at once, as the kubelet updates a mounted
// Secret.
func writeAtOnce(t testing.TB, path string, b []byte) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// testWriter writes a log into t's.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(b), "\n"))
	return len(b), nil
}
