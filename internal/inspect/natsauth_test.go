package inspect

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"universalcontroller.dev/uc/internal/bustest"
	"universalcontroller.dev/uc/internal/natsauth"
	"universalcontroller.dev/uc/internal/topology"
	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// authServer is a NATS server that knows only the users of `uc nats-config
// --cli`, each password its user's name.
func authServer(t *testing.T) string {
	t.Helper()
	users, err := natsauth.Users(4, testController)
	if err != nil {
		t.Fatal(err)
	}
	users = append(users, natsauth.Inspector(), natsauth.Operator())
	dir := t.TempDir()
	conf := fmt.Sprintf("jetstream { store_dir: %q }\n", filepath.Join(dir, "js"))
	for _, u := range users {
		conf += fmt.Sprintf("%s: %q\n", natsauth.PasswordVariable(u.Name), u.Name)
	}
	path := filepath.Join(dir, "nats.conf")
	if err := os.WriteFile(path, []byte(conf+natsauth.Config(users)), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(path)
	if err != nil {
		t.Fatal(err)
	}
	opts.Host, opts.Port, opts.NoLog, opts.NoSigs = "127.0.0.1", -1, true, true
	return bustest.Start(t, opts).ClientURL()
}

// user is a connection as one of uc's NATS users, with the operations the
// server refused it.
type user struct {
	nc      *nats.Conn
	js      jetstream.JetStream
	refused chan error
}

func connectAs(t *testing.T, url, name, inbox string) *user {
	t.Helper()
	u := &user{refused: make(chan error, 16)}
	var err error
	c := bus.Connection{URL: url, User: name, Password: name, InboxPrefix: inbox}
	if u.nc, err = c.Connect(name, slog.Default(), func(err error) { u.refused <- err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(u.nc.Close)
	if u.js, err = jetstream.New(u.nc, jetstream.WithDefaultTimeout(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	return u
}

// refusal is the permissions violation the server reported, or nil when
// it reported none within a moment.
func (u *user) refusal() error {
	select {
	case err := <-u.refused:
		return err
	case <-time.After(500 * time.Millisecond):
		return nil
	}
}

// TestPermissions: on a server with uc's users, uc-inspector reads all that
// uc trace and uc dlq ls/show read, and may neither replay nor resync;
// uc-operator does both, and the watcher answers its resync requests.
func TestPermissions(t *testing.T) {
	ctx := t.Context()
	url := authServer(t)
	// The bus as the roles and a hook worker make it.
	d := connectAs(t, url, natsauth.RoleUser(natsauth.Dispatcher), natsauth.RoleInbox(natsauth.Dispatcher))
	if err := topology.EnsureStreams(ctx, d.js, topology.Streams, topology.Options{Storage: jetstream.MemoryStorage}); err != nil {
		t.Fatal(err)
	}
	if _, err := topology.EnsureConsumer(ctx, d.js, topology.HookConsumer(testController, hooks.Sync)); err != nil {
		t.Fatal(err)
	}
	a := connectAs(t, url, natsauth.RoleUser(natsauth.Applier), natsauth.RoleInbox(natsauth.Applier))
	for _, bucket := range []string{bus.FenceBucket, bus.PartitionsBucket} {
		if _, err := a.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: bucket, Storage: jetstream.MemoryStorage}); err != nil {
			t.Fatal(err)
		}
	}
	setFence(t, a.js, "q", 10)
	plan := requestMsg(t, metaOf("p", "p", 20), "plan-p-20") // a dry-run controller's plan, as the applier publishes it
	plan.Subject = metaOf("p", "p", 20).PlanSubject()
	plan.Header.Set("ce-type", bus.PlanType)
	if _, err := a.js.PublishMsg(ctx, plan); err != nil {
		t.Fatalf("the applier publishes a plan: %v", err)
	}
	w := connectAs(t, url, natsauth.RoleUser(natsauth.Watcher), natsauth.RoleInbox(natsauth.Watcher))
	waiting := metaOf("p", "p", 20)
	if _, err := w.js.PublishMsg(ctx, requestMsg(t, waiting, "req-p-20")); err != nil {
		t.Fatal(err)
	}
	// The watcher's side of a resync request and of a question: it may
	// answer them.
	if _, err := w.nc.Subscribe(bus.AllResyncs(), func(m *nats.Msg) { _ = m.Respond([]byte(`{}`)) }); err != nil {
		t.Fatal(err)
	}
	if _, err := w.nc.Subscribe(bus.AllInspects(), func(m *nats.Msg) { _ = m.Respond([]byte(`{"id":"req-p-20"}`)) }); err != nil {
		t.Fatal(err)
	}
	h := connectAs(t, url, natsauth.HookUser(testController), bus.HookInbox(testController))
	dead := deadLetter(t, h.js, metaOf("q", "q", 30), "req-q-30")

	inspector := connectAs(t, url, natsauth.InspectorUser, natsauth.CLIInbox)
	b := NewBus(inspector.js)
	list, err := b.DeadLetters(ctx, "")
	if err != nil || len(list) != 1 {
		t.Fatalf("uc dlq ls as the inspector: %d dead letters, %v", len(list), err)
	}
	if _, err := b.DeadLetter(ctx, dead); err != nil {
		t.Fatalf("uc dlq show as the inspector: %v", err)
	}
	hook, err := b.hook(ctx, testController, hooks.Sync, &v1alpha1.Hook{}, parentWithUID("p"))
	if err != nil || hook.Consumer == nil || hook.Request == nil {
		t.Fatalf("the bus of uc trace as the inspector: %+v, %v", hook, err)
	}
	if _, err := b.holder(ctx, 0); err != nil {
		t.Fatalf("the partition's holder as the inspector: %v", err)
	}
	if last, err := b.lastPublished(ctx, testController, parentWithUID("p"), false); err != nil || last.ID != "req-p-20" {
		t.Fatalf("the inspector's question to the watcher: %+v, %v", last, err)
	}
	if plans, err := b.plans(ctx, testController, "p", hooks.Sync); err != nil || len(plans) != 1 || plans[0].Type != bus.PlanType {
		t.Fatalf("the plans of uc trace as the inspector: %+v, %v", plans, err)
	}
	if err := inspector.refusal(); err != nil {
		t.Fatalf("the server refused the inspector a read: %v", err)
	}
	// No answer comes to what the server refuses.
	refused := func() context.Context {
		ctx, cancel := context.WithTimeout(ctx, time.Second)
		t.Cleanup(cancel)
		return ctx
	}
	if _, err := b.Replay(refused(), dead); err == nil || !isRefused(inspector.refusal(), bus.RequestPrefix) {
		t.Fatalf("the inspector replayed a dead letter (err %v)", err)
	}
	if _, err := resync(refused(), inspector.nc, testController, 4, parentWithUID("p")); err == nil || !isRefused(inspector.refusal(), bus.ResyncPrefix) {
		t.Fatalf("the inspector asked for a resync (err %v)", err)
	}

	operator := connectAs(t, url, natsauth.OperatorUser, natsauth.CLIInbox)
	r, err := NewBus(operator.js).Replay(ctx, dead)
	if err != nil || r.Request == "" || r.Note != "" {
		t.Fatalf("uc dlq replay as the operator: %+v, %v", r, err)
	}
	answer, err := resync(ctx, operator.nc, testController, 4, parentWithUID("p"))
	if err != nil || answer.Error != "" {
		t.Fatalf("uc resync as the operator: %+v, %v", answer, err)
	}
	for _, u := range []*user{operator, w} {
		if err := u.refusal(); err != nil {
			t.Fatalf("the server refused: %v", err)
		}
	}
}

// isRefused tells a permissions violation on a subject under prefix.
func isRefused(err error, prefix string) bool {
	return errors.Is(err, nats.ErrPermissionViolation) && strings.Contains(err.Error(), `"`+prefix+".")
}
