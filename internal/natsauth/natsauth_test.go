package natsauth

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/conf"
	"github.com/nats-io/nats-server/v2/server"

	"universalcontroller.dev/uc/schemas/bus"
)

// TestConfigLoads checks that nats-server reads the configuration: every
// user, with the password of its variable, and the watcher may answer the
// requests it receives.
func TestConfigLoads(t *testing.T) {
	users, err := Users(4, "foo-controller", "foo.example.com", bus.DecoratorController("foo-controller"))
	if err != nil {
		t.Fatal(err)
	}
	users = append(users, Inspector(), Operator())
	var vars strings.Builder
	for _, u := range users {
		vars.WriteString(PasswordVariable(u.Name) + ": \"pw-" + u.Name + "\"\n")
	}
	if _, err := conf.Parse(vars.String() + Config(users)); err != nil {
		t.Fatalf("nats-server cannot parse the configuration: %v", err)
	}
	path := t.TempDir() + "/nats.conf"
	if err := os.WriteFile(path, []byte(vars.String()+Config(users)), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, u := range opts.Users {
		names = append(names, u.Username)
		if u.Password != "pw-"+u.Username || u.Account.Name != Account {
			t.Errorf("user %s: password %q, account %s", u.Username, u.Password, u.Account.Name)
		}
		if u.Permissions == nil || len(u.Permissions.Publish.Allow) == 0 || len(u.Permissions.Subscribe.Allow) == 0 {
			t.Errorf("user %s has no permissions", u.Username)
		}
		if answers := u.Permissions != nil && u.Permissions.Response != nil; answers != (u.Username == RoleUser(Watcher)) {
			t.Errorf("user %s may answer requests: %t", u.Username, answers)
		}
	}
	slices.Sort(names)
	want := []string{"hook-foo-controller", "hook-foo.example.com", "hook-ucd=foo-controller", "uc-applier", "uc-dispatcher", "uc-inspector", "uc-operator", "uc-watcher"}
	if !slices.Equal(names, want) {
		t.Errorf("users %q, want %q", names, want)
	}
}

// TestHookWorkersAreConfined checks that a controller's hook user reaches
// nothing of another controller, even one whose name extends its own.
func TestHookWorkersAreConfined(t *testing.T) {
	a, b := HookWorker("foo"), HookWorker("foo.bar")
	for _, s := range append(slices.Clone(a.Publish), a.Subscribe...) {
		for _, other := range []string{"uc.reply.foo_bar.sync.0.x", "uc.dlq.foo_bar.sync.0.x", "uc.req.foo.sync.0.x",
			"$JS.API.CONSUMER.MSG.NEXT.UC_REQUESTS.hook_foo_bar_sync", "$JS.ACK.UC_REQUESTS.hook_foo_bar_sync.1.2.3.4.5",
			bus.HookInbox("foo.bar") + ".x", "_INBOX.x"} {
			if server.SubjectsCollide(s, other) {
				t.Errorf("hook user of foo may use %s, which matches %s", s, other)
			}
		}
	}
	if !slices.Contains(b.Publish, "uc.reply.foo_bar.>") {
		t.Errorf("hook user of foo.bar cannot reply: %q", b.Publish)
	}
	if _, err := Users(1, "a-b", "a.b"); err == nil {
		t.Error("controllers a-b and a.b share a password variable, but Users accepted them")
	}
}

// TestDecoratorHookWorkersAreConfined checks that the hook users of a
// UniversalDecorator and of a UniversalController of the same name reach
// nothing of each other.
func TestDecoratorHookWorkersAreConfined(t *testing.T) {
	decorator := bus.DecoratorController("foo")
	for _, tc := range []struct{ user, other string }{{decorator, "foo"}, {"foo", decorator}} {
		u := HookWorker(tc.user)
		reply := bus.Address{Controller: tc.other, Hook: "sync", ParentUID: "x"}
		for _, s := range append(slices.Clone(u.Publish), u.Subscribe...) {
			for _, other := range []string{reply.ReplySubject(), reply.DeadLetterSubject(), reply.RequestSubject(),
				"$JS.API.CONSUMER.MSG.NEXT.UC_REQUESTS." + bus.HookConsumer(tc.other, "sync"), bus.HookInbox(tc.other) + ".x"} {
				if server.SubjectsCollide(s, other) {
					t.Errorf("hook user of %s may use %s, which matches %s", tc.user, s, other)
				}
			}
		}
	}
	if !slices.Contains(HookWorker(decorator).Publish, "uc.reply.ucd=foo.>") {
		t.Errorf("hook user of decorator foo cannot reply: %q", HookWorker(decorator).Publish)
	}
}

// TestInspectorChangesNothing checks that the inspector may only read: no
// publish on uc's subjects, no JetStream API call that writes, and that the
// operator may do what the inspector may, and replay and resync.
func TestInspectorChangesNothing(t *testing.T) {
	inspector, operator := Inspector(), Operator()
	addr := bus.Address{Controller: "foo", Hook: "sync", ParentUID: "x"}
	writes := []string{addr.RequestSubject(), addr.ReplySubject(), addr.DeadLetterSubject(), addr.ResyncSubject(),
		"$JS.API.STREAM.MSG.DELETE.UC_DEADLETTER", "$JS.API.STREAM.PURGE.UC_REQUESTS", "$JS.API.CONSUMER.CREATE.UC_REQUESTS.x",
		"$JS.API.CONSUMER.DELETE.UC_REQUESTS.hook_foo_sync", "$JS.ACK.UC_REQUESTS.hook_foo_sync.1.2.3.4.5", "$KV.uc_fence.x"}
	for _, s := range inspector.Publish {
		for _, w := range writes {
			if server.SubjectsCollide(s, w) {
				t.Errorf("the inspector may publish %s, which matches %s", s, w)
			}
		}
	}
	for _, s := range inspector.Publish {
		if !slices.Contains(operator.Publish, s) {
			t.Errorf("the operator may not publish %s, which the inspector may", s)
		}
	}
	for _, w := range []string{addr.RequestSubject(), addr.ResyncSubject(), "$JS.API.STREAM.MSG.DELETE.UC_DEADLETTER"} {
		if !slices.ContainsFunc(operator.Publish, func(s string) bool { return server.SubjectsCollide(s, w) }) {
			t.Errorf("the operator may not publish %s", w)
		}
	}
}
