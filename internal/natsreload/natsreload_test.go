package natsreload

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	natsconf "github.com/nats-io/nats-server/v2/conf"
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
