package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"universalcontroller.dev/uc/internal/inspect"
	"universalcontroller.dev/uc/internal/natsauth"
	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/sdk/go/hook"
	"universalcontroller.dev/uc/test/testbed"
)

// natsAuthBed is a nats-server configured with the users `uc nats-config
// --cli` prints, taking only TLS clients with a certificate, and the password of
// every user.
type natsAuthBed struct {
	srv       *testbed.NATSServer
	tls       *testbed.TLSFiles
	passwords map[string]string // by user
}

// startNATSAuth starts it for the roles and the hook workers of the
// controllers (a decorator by its name on the bus, bus.DecoratorController).
func startNATSAuth(t *testing.T, controllers ...string) *natsAuthBed {
	t.Helper()
	dir := t.TempDir()
	tlsFiles, err := testbed.WriteTLS(dir, "uc-e2e")
	if err != nil {
		t.Fatal(err)
	}
	// The users, as an administrator makes them.
	var ucs, decorators []string
	for _, c := range controllers {
		if d, ok := bus.DecoratorOf(c); ok {
			decorators = append(decorators, d)
		} else {
			ucs = append(ucs, c)
		}
	}
	conf, err := exec.CommandContext(t.Context(), env.uc.bin, "nats-config", "--cli",
		"--controllers", strings.Join(ucs, ","), "--decorators", strings.Join(decorators, ",")).Output()
	if err != nil {
		t.Fatalf("uc nats-config: %v", err)
	}
	b := &natsAuthBed{tls: tlsFiles, passwords: map[string]string{}}
	var vars strings.Builder
	for _, m := range regexp.MustCompile(`user: "([^"]+)"`).FindAllStringSubmatch(string(conf), -1) {
		pw := make([]byte, 12)
		_, _ = rand.Read(pw)
		b.passwords[m[1]] = hex.EncodeToString(pw)
		fmt.Fprintf(&vars, "%s: %q\n", natsauth.PasswordVariable(m[1]), b.passwords[m[1]])
	}
	if want := 5 + len(controllers); len(b.passwords) != want { // the roles, the commands' two
		t.Fatalf("uc nats-config declared %d users, want %d:\n%s", len(b.passwords), want, conf)
	}
	b.srv, err = testbed.StartNATSWith(t.Context(), filepath.Join(dir, "nats"), testbed.NATSOptions{Config: vars.String() + string(conf), TLS: tlsFiles})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.srv.Stop)
	return b
}

// conn is how user connects, over TLS with the client certificate.
func (b *natsAuthBed) conn(user string) bus.Connection {
	return bus.Connection{URL: b.srv.URL(), User: user, Password: b.passwords[user],
		TLSCA: b.tls.CA, TLSCert: b.tls.ClientCert, TLSKey: b.tls.ClientKey}
}

// roleFlags are the flags of a uc role connecting as its user.
func (b *natsAuthBed) roleFlags(role string) []string {
	user := natsauth.RoleUser(role)
	return []string{"--nats-user", user, "--nats-password", b.passwords[user]}
}

// TestNATSLeastPrivilege runs uc's roles and the Widget controller's hook
// worker on a NATS server that knows only the users of `uc nats-config`,
// over TLS with client certificates, each process as its own user: the
// Widgets converge and the server refused none of their operations. A hook
// worker of another controller (Foo), or of a UniversalDecorator named
// like the Widget controller, can neither fetch the Widget controller's
// requests nor publish its replies, and says so.
func TestNATSLeastPrivilege(t *testing.T) {
	const widgets, foos = "widget-controller", "foo-controller"
	decorator := bus.DecoratorController(widgets)
	nb := startNATSAuth(t, widgets, foos, decorator)
	installCRD(t, "test/e2e/testdata/widget-crd.yaml", widgetGVR)
	b := &rolesOnBus{t: t, ns: namespace(t), dir: t.TempDir(), args: []string{
		"--kubeconfig", env.bed.Kubeconfig(), "--nats-url", nb.srv.URL(), "--log-level", "debug",
		"--nats-tls-ca", nb.tls.CA, "--nats-tls-cert", nb.tls.ClientCert, "--nats-tls-key", nb.tls.ClientKey,
	}}
	metricsPorts, err := testbed.FreePorts(len(natsauth.Roles))
	if err != nil {
		t.Fatal(err)
	}
	metrics := map[string]string{}
	procs := map[string]*roleProcess{}
	for i, role := range natsauth.Roles {
		metrics[role] = fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPorts[i])
		procs[role] = b.start(role, role, append(nb.roleFlags(role), "--metrics-addr", fmt.Sprintf("127.0.0.1:%d", metricsPorts[i]))...)
	}
	ctx, stop := context.WithCancel(t.Context())
	var served sync.WaitGroup
	served.Add(1)
	var workerErr error
	go func() {
		defer served.Done()
		workerErr = hook.Run(ctx, nb.conn(natsauth.HookUser(widgets)), widgets, []hook.Handler{hook.Func(hooks.Sync, widgetSync)})
	}()
	t.Cleanup(func() {
		stop()
		served.Wait()
		if workerErr != nil {
			t.Errorf("the Widget worker stopped: %v", workerErr)
		}
	})

	start := time.Now()
	names := []string{"w1", "w2", "w3"}
	for _, n := range names {
		b.createWidget(n, "1")
	}
	eventually(t, 2*time.Minute, b.converged("1", names...))
	t.Logf("%d Widgets converged %s after their creation, every process on its own NATS user over TLS",
		len(names), time.Since(start).Round(10*time.Millisecond))

	eventually(t, 10*time.Second, expectHTTP(t.Context(), metrics[natsauth.Watcher], 200,
		`uc_hook_requests_published_total{controller="widget-controller",hook="sync"}`))
	// Each role's NATS user may read the stream and consumer infos its
	// metrics report: none is missing.
	eventually(t, 10*time.Second, expectHTTP(t.Context(), metrics[natsauth.Dispatcher], 200, "\nuc_bus_info_errors_total 0\n",
		`uc_stream_messages{stream="UC_DEADLETTER"}`, `uc_consumer_pending_messages{consumer="hook_widget-controller_sync",stream="UC_REQUESTS"}`))
	eventually(t, 10*time.Second, expectHTTP(t.Context(), metrics[natsauth.Applier], 200, "\nuc_bus_info_errors_total 0\n",
		`uc_consumer_pending_messages{consumer="applier_`, `uc_applies_total{controller="widget-controller",hook="sync",result="applied"}`))
	eventually(t, 10*time.Second, expectHTTP(t.Context(), metrics[natsauth.Watcher], 200, "\nuc_bus_info_errors_total 0\n"))

	t.Run("OtherControllersWorker", func(t *testing.T) { natsAuthIntruder(t, nb, widgets, foos) })
	t.Run("DecoratorsWorker", func(t *testing.T) {
		// A decorator of the same name, decorating nothing: its hook
		// consumer exists, its worker's user is its own.
		registerDecorator(t, widgets, map[string]any{
			"resources": []any{map[string]any{"apiVersion": "v1", "resource": "configmaps",
				"labelSelector": map[string]any{"matchLabels": map[string]any{"e2e.universalcontroller.dev/decorated-by": "nothing"}}}},
			"hooks": map[string]any{"sync": map[string]any{}},
		})
		natsAuthIntruder(t, nb, widgets, decorator)
	})
	t.Run("ForgedReply", func(t *testing.T) { natsAuthForgedReply(t, nb, b, procs[natsauth.Applier], widgets, foos) })
	t.Run("InspectorAndOperator", func(t *testing.T) { natsAuthCommands(t, nb, b) })

	// No role nor the Widget worker was refused anything.
	log, err := os.ReadFile(filepath.Join(nb.srv.Dir(), "nats-server.log"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(log), "\n") {
		if strings.Contains(line, "Violation") && !strings.Contains(line, "intruder") && !strings.Contains(line, "uc-worker-"+widgets) &&
			!strings.Contains(line, natsauth.InspectorUser) { // natsAuthCommands' resync
			t.Errorf("the server refused a uc process: %s", line)
		}
	}
}

// natsAuthIntruder connects as the hook user of controller own and tries to
// serve controller victim.
func natsAuthIntruder(t *testing.T, nb *natsAuthBed, victim, own string) {
	ctx := t.Context()
	refused := make(chan error, 16)
	c := nb.conn(natsauth.HookUser(own))
	c.InboxPrefix = bus.HookInbox(own)
	nc, err := c.Connect("intruder", slog.Default(), func(err error) { refused <- err })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc, jetstream.WithDefaultTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	// expectRefused fails t unless the server refused an operation on
	// subject, with a permissions violation naming it.
	expectRefused := func(what, subject string, err error) {
		t.Helper()
		if err == nil {
			t.Errorf("%s: no error", what)
		}
		timeout := time.After(5 * time.Second)
		for {
			select {
			case e := <-refused:
				if errors.Is(e, nats.ErrPermissionViolation) && strings.Contains(e.Error(), `"`+subject+`"`) {
					t.Logf("%s: %v; the server said: %v", what, err, e)
					return
				}
				t.Logf("%s: the server also said %v", what, e)
			case <-timeout:
				t.Errorf("%s failed (%v) without a permissions violation on %s", what, err, subject)
				return
			}
		}
	}

	// Its own controller's consumer (made when it was registered):
	// allowed.
	if err := poll(ctx, 30*time.Second, func() error {
		_, err := js.Consumer(ctx, bus.RequestStream, bus.HookConsumer(own, hooks.Sync))
		return err
	}); err != nil {
		t.Fatalf("the %s worker cannot bind its own consumer: %v", own, err)
	}

	addr := bus.Address{Controller: victim, Hook: hooks.Sync, Partition: 0, ParentUID: "6f1c2a3e-0b5c-4d2e-9a1f-2b7c8d9e0f11"}
	_, err = js.Publish(ctx, addr.ReplySubject(), []byte(`{"children":[]}`))
	expectRefused("publish a reply for "+victim, addr.ReplySubject(), err)

	_, err = js.Publish(ctx, addr.DeadLetterSubject(), []byte(`{}`))
	expectRefused("publish a dead letter for "+victim, addr.DeadLetterSubject(), err)

	consumer := bus.HookConsumer(victim, hooks.Sync)
	_, err = js.Consumer(ctx, bus.RequestStream, consumer)
	expectRefused("bind "+consumer, "$JS.API.CONSUMER.INFO."+bus.RequestStream+"."+consumer, err)

	next := "$JS.API.CONSUMER.MSG.NEXT." + bus.RequestStream + "." + consumer
	_, err = nc.Request(next, []byte(`{"batch":1,"expires":1000000000}`), 2*time.Second)
	expectRefused("fetch from "+consumer, next, err)

	for _, subject := range []string{bus.RequestPrefix + ".>", "_INBOX.>", bus.HookInbox(victim) + ".>"} {
		sub, err := nc.SubscribeSync(subject)
		if err == nil {
			_, err = sub.NextMsg(2 * time.Second)
		}
		expectRefused("subscribe to "+subject, subject, err)
	}

	// The SDK stops at the first refusal, naming it.
	start := time.Now()
	runCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	err = hook.Run(runCtx, nb.conn(natsauth.HookUser(own)), victim, []hook.Handler{hook.Func(hooks.Sync, widgetSync)}, hook.WithLogger(slog.Default()))
	if !errors.Is(err, nats.ErrPermissionViolation) || runCtx.Err() != nil {
		t.Fatalf("hook.Run for %s as %s: %v, want a permissions violation", victim, natsauth.HookUser(own), err)
	}
	t.Logf("hook.Run for %s as %s stopped after %s: %v", victim, natsauth.HookUser(own), time.Since(start).Round(time.Millisecond), err)
}

// natsAuthForgedReply has the hook user of controller own publish, on one of
// its own subjects, a reply whose attributes claim it is victim's, for a
// converged Widget, wanting no children. The applier drops it: the Widget's
// ConfigMap stays.
func natsAuthForgedReply(t *testing.T, nb *natsAuthBed, b *rolesOnBus, applier *roleProcess, victim, own string) {
	ctx := t.Context()
	c := nb.conn(natsauth.HookUser(own))
	c.InboxPrefix = bus.HookInbox(own)
	js := jetStreamAs(t, c, "forger")
	w, err := env.dyn.Resource(widgetGVR).Namespace(b.ns).Get(ctx, "w1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	claimed := bus.Meta{
		Address:   bus.Address{Controller: victim, Hook: hooks.Sync, Partition: bus.Partition(w.GetUID(), bus.DefaultPartitions), ParentUID: w.GetUID()},
		Namespace: b.ns, Name: w.GetName(), Generation: w.GetGeneration(), ResourceVersion: w.GetResourceVersion(),
		Observation: 1 << 50, RequestID: "forged", // newer than any observation
	}
	e := event.New()
	e.SetID("forged-reply")
	e.SetType(bus.ResponseType(hooks.Sync))
	e.SetSource("/forger")
	claimed.SetOn(&e)
	if err := e.SetData(event.ApplicationJSON, hooks.SyncResponse{}); err != nil {
		t.Fatal(err)
	}
	forgedOn := claimed
	forgedOn.Controller = own
	msg, err := bus.ToMsg(ctx, forgedOn.ReplySubject(), &e)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.PublishMsg(ctx, msg); err != nil {
		t.Fatalf("publish on its own reply subject %s: %v", msg.Subject, err)
	}
	eventually(t, 30*time.Second, func() error {
		if !applier.logHas("dropping a reply that is not a uc reply") {
			return fmt.Errorf("the applier has not dropped the forged reply")
		}
		return nil
	})
	if _, err := env.kube.CoreV1().ConfigMaps(b.ns).Get(ctx, "w1", metav1.GetOptions{}); err != nil {
		t.Errorf("the forged reply touched the Widget's ConfigMap: %v", err)
	}
}

// natsAuthCommands runs uc trace as uc-inspector and uc resync as
// uc-operator against the roles, each on its own user: the trace reads the
// bus, and the watcher answers the resync, whose request is applied. The
// inspector may not ask for a resync.
func natsAuthCommands(t *testing.T, nb *natsAuthBed, b *rolesOnBus) {
	ctx := t.Context()
	as := func(user string, args ...string) []string {
		return append(args, "-n", b.ns, "--nats-url", nb.srv.URL(), "--nats-user", user, "--nats-password", nb.passwords[user],
			"--nats-tls-ca", nb.tls.CA, "--nats-tls-cert", nb.tls.ClientCert, "--nats-tls-key", nb.tls.ClientKey)
	}
	trace := func() (*inspect.Trace, error) {
		traces, err := ucJSON[[]*inspect.Trace](ctx, as(natsauth.InspectorUser, "trace", "widget/w1")...)
		if err == nil && (len(traces) != 1 || traces[0].Verdict.State != inspect.Synced || traces[0].Fence == nil || traces[0].Partition.Holder == "" ||
			traces[0].Published == nil || traces[0].Published.ID == "") {
			err = fmt.Errorf("uc trace widget/w1 as %s: %+v, want one trace of it synced, its partition held, the watcher's last request named", natsauth.InspectorUser, traces)
		}
		if err != nil {
			return nil, err
		}
		return traces[0], nil
	}
	before, err := trace()
	if err != nil {
		t.Fatal(err)
	}
	out, err := ucCLI(ctx, as(natsauth.OperatorUser, "resync", "widget/w1")...)
	if err != nil || !strings.Contains(out, "queued by the watcher") {
		t.Fatalf("uc resync widget/w1 as %s: %s (err %v)", natsauth.OperatorUser, out, err)
	}
	eventually(t, 30*time.Second, func() error {
		after, err := trace()
		if err == nil && after.Fence.Request == before.Fence.Request {
			err = fmt.Errorf("the fence still names the request %s", after.Fence.Request)
		}
		return err
	})
	if _, err := ucCLI(ctx, as(natsauth.InspectorUser, "resync", "widget/w1")...); err == nil || !strings.Contains(err.Error(), "Permissions Violation") {
		t.Fatalf("uc resync as %s: %v, want a permissions violation", natsauth.InspectorUser, err)
	}
}
