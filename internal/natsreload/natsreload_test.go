package natsreload

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	natsconf "github.com/nats-io/nats-server/v2/conf"
	"k8s.io/apimachinery/pkg/util/wait"
)

// TestRender: the rendered users, parsed as nats-server parses them, have
// the passwords of the files, whatever characters they hold; a subject
// in quotes is no variable; a variable without a file fails, naming it,
// unless the environment has it.
func TestRender(t *testing.T) {
	const auth = `# $NOT_A_VARIABLE in a comment
users: [
  {user: "a", password: $UC_NATS_PASSWORD_A, permissions: {publish: ["$JS.API.>"]}}
  {user: "b", password: $UC_NATS_PASSWORD_B}
]
`
	for _, tc := range []struct {
		name      string
		passwords map[string]string
		env       map[string]string
		want      map[string]string // user: password
		err       string
	}{
		{"plain", map[string]string{"UC_NATS_PASSWORD_A": "pa\n", "UC_NATS_PASSWORD_B": "pb"}, nil, map[string]string{"a": "pa", "b": "pb"}, ""},
		{"any character", map[string]string{"UC_NATS_PASSWORD_A": `q"uo\te $x ü`, "UC_NATS_PASSWORD_B": "\t#;{}"}, nil, map[string]string{"a": `q"uo\te $x ü`, "b": "\t#;{}"}, ""},
		{"from the environment", map[string]string{"UC_NATS_PASSWORD_A": "pa"}, map[string]string{"UC_NATS_PASSWORD_B": "env"}, map[string]string{"a": "pa", "b": "env"}, ""},
		{"missing", map[string]string{"UC_NATS_PASSWORD_A": "pa"}, nil, nil, "$UC_NATS_PASSWORD_B"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			c := Config{AuthConf: filepath.Join(dir, "auth.conf"), PasswordsDir: filepath.Join(dir, "passwords"), Out: filepath.Join(dir, "out.conf")}
			if err := os.MkdirAll(c.PasswordsDir, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(c.AuthConf, []byte(auth), 0o600); err != nil {
				t.Fatal(err)
			}
			for k, v := range tc.passwords {
				if err := os.WriteFile(filepath.Join(c.PasswordsDir, k), []byte(v), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			changed, err := c.Write()
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Write: %v, want an error naming %s", err, tc.err)
				}
				return
			}
			if err != nil || !changed {
				t.Fatalf("Write: %t, %v", changed, err)
			}
			if changed, err := c.Write(); err != nil || changed {
				t.Errorf("Write again, nothing changed: %t, %v; want false", changed, err)
			}
			conf, err := natsconf.ParseFile(c.Out)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, u := range conf["users"].([]any) {
				m := u.(map[string]any)
				got[m["user"].(string)] = m["password"].(string)
			}
			for user, pw := range tc.want {
				if got[user] != pw {
					t.Errorf("user %s: password %q, want %q", user, got[user], pw)
				}
			}
		})
	}
}

// TestRunReloads: Run signals the server of the pid file (this test's
// process) once when it starts, for a change made before it watched the
// files, and once a password changes; a server not running yet is not
// signalled.
func TestRunReloads(t *testing.T) {
	dir := t.TempDir()
	c := Config{AuthConf: filepath.Join(dir, "auth.conf"), PasswordsDir: filepath.Join(dir, "passwords"),
		Out: filepath.Join(dir, "out", "auth.conf"), PidFile: filepath.Join(dir, "nats.pid")}
	for _, d := range []string{c.PasswordsDir, filepath.Dir(c.Out)} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	write := func(path, data string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(c.AuthConf, "users: [{user: a, password: $UC_NATS_PASSWORD_A}]\n")
	password := filepath.Join(c.PasswordsDir, "UC_NATS_PASSWORD_A")
	write(password, "first")
	hups := make(chan os.Signal, 8)
	signal.Notify(hups, syscall.SIGHUP)
	t.Cleanup(func() { signal.Stop(hups) })
	run := func(t *testing.T) (stop func()) {
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- c.Run(ctx, slog.New(slog.DiscardHandler)) }()
		return func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		}
	}
	signalled := func(t *testing.T) {
		t.Helper()
		select {
		case <-hups:
		case <-time.After(10 * time.Second):
			t.Fatal("the server was not signalled to reload")
		}
	}
	rendered := func(t *testing.T, want string) {
		t.Helper()
		b, err := os.ReadFile(c.Out)
		if err != nil || !strings.Contains(string(b), want) {
			t.Errorf("rendered %q (%v), want the password %q", b, err, want)
		}
	}

	t.Run("no server yet", func(t *testing.T) {
		stop := run(t)
		write(password, "second")
		if err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			b, _ := os.ReadFile(c.Out)
			return strings.Contains(string(b), `"second"`), nil
		}); err != nil {
			t.Fatalf("the change was not rendered: %v", err)
		}
		stop()
		select {
		case <-hups:
			t.Fatal("signalled a server that has no pid file")
		default:
		}
	})
	write(c.PidFile, strconv.Itoa(os.Getpid()))
	t.Run("changed before it watched", func(t *testing.T) {
		write(password, "third") // the server started from "second"
		stop := run(t)
		defer stop()
		signalled(t)
		rendered(t, `"third"`)
		write(password, "fourth")
		signalled(t)
		rendered(t, `"fourth"`)
	})
}
