package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/klog/v2"
)

// ucOutput is what one run of uc printed, and its exit code.
type ucOutput struct {
	code           int
	stdout, stderr string
}

// runUC runs uc with args, as main does.
func runUC(t *testing.T, args ...string) ucOutput {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := execute(t.Context(), args, &stdout, &stderr)
	return ucOutput{code, stdout.String(), stderr.String()}
}

// TestHelp: uc, its help command and every command's -h exit 0 and print
// the command's description, its examples, and each flag with its UC_*
// variable.
func TestHelp(t *testing.T) {
	root := newRootCommand()
	for _, args := range [][]string{{}, {"-h"}, {"--help"}, {"help"}} {
		out := runUC(t, args...)
		if out.code != 0 || !strings.Contains(out.stdout, root.Long) || !strings.Contains(out.stdout, root.Example) {
			t.Errorf("uc %s: exit %d, want 0 and uc's description and examples; stdout:\n%s\nstderr:\n%s", strings.Join(args, " "), out.code, out.stdout, out.stderr)
		}
		for _, c := range root.Commands() {
			if !strings.Contains(out.stdout, "  "+c.Name()+" ") {
				t.Errorf("uc %s does not list the command %s:\n%s", strings.Join(args, " "), c.Name(), out.stdout)
			}
		}
	}
	for _, c := range subcommands(root) {
		path := commandPath(c)
		if c.Long == "" || c.Example == "" {
			t.Errorf("uc %s has no description (Long) or no examples", strings.Join(path, " "))
		}
		for _, args := range [][]string{append(path, "-h"), append(path, "--help"), append([]string{"help"}, path...)} {
			out := runUC(t, args...)
			if out.code != 0 || !strings.Contains(out.stdout, c.Long) || !strings.Contains(out.stdout, c.Example) {
				t.Errorf("uc %s: exit %d, want 0 and the command's description and examples; stdout:\n%s\nstderr:\n%s", strings.Join(args, " "), out.code, out.stdout, out.stderr)
			}
			c.Flags().VisitAll(func(f *pflag.Flag) {
				if f.Name == "help" {
					return
				}
				line, env := flagLine(out.stdout, f.Name), f.Annotations[envAnnotation][0]
				if !strings.Contains(line, "[$"+env+"]") {
					t.Errorf("uc %s: the flag --%s is not listed with its variable %s: %q", strings.Join(args, " "), f.Name, env, line)
				}
			})
		}
	}
}

// commandPath is the words that run c: ["dlq", "ls"] for uc dlq ls.
func commandPath(c *cobra.Command) []string { return strings.Fields(c.CommandPath())[1:] }

// flagLine is the line of help's Flags that lists --name.
func flagLine(help, name string) string {
	_, flags, _ := strings.Cut(help, "\nFlags:\n")
	for line := range strings.SplitSeq(flags, "\n") {
		line := strings.TrimSpace(line)
		if _, long, ok := strings.Cut(line, ", "); ok && strings.HasPrefix(line, "-") && !strings.HasPrefix(line, "--") {
			line = long // after its shorthand: -n, --namespace
		}
		if strings.HasPrefix(line, "--"+name+" ") {
			return line
		}
	}
	return ""
}

// TestCommands: uc's commands are the roles, nats-config, worker, render,
// the commands that look into the pipeline, and version.
func TestCommands(t *testing.T) {
	var names []string
	for _, c := range subcommands(newRootCommand()) {
		names = append(names, strings.Join(commandPath(c), " "))
	}
	for _, want := range []string{"run", "watcher", "dispatcher", "applier", "nats-config", "worker", "render", "trace", "dlq ls", "dlq show", "dlq replay", "resync", "version"} {
		if !slices.Contains(names, want) {
			t.Errorf("no command %s among %v", want, names)
		}
	}
}

// TestUsageErrors: a wrong command line exits 2 and says what is wrong
// and where help is.
func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{args: []string{"frobnicate"}, want: `unknown command "frobnicate"`},
		{args: []string{"run", "--no-such-flag"}, want: "unknown flag: --no-such-flag"},
		{args: []string{"applier", "extra"}, want: `unknown command "extra" for "uc applier"`},
		{args: []string{"nats-config", "--partitions", "many"}, want: `invalid argument "many" for "--partitions"`},
		{args: []string{"nats-config"}, env: map[string]string{"UC_PARTITIONS": "many"}, want: "UC_PARTITIONS"},
		{args: []string{"run", "--log-format", "xml"}, want: `--log-format "xml"`},
		{args: []string{"watcher", "--log-level", "loud"}, want: `--log-level "loud"`},
		{args: []string{"trace", "example-foo"}, want: `"example-foo" is not KIND/NAME`},
		{args: []string{"trace", "foo/example-foo", "-o", "yaml"}, want: `--output "yaml"`},
		{args: []string{"dlq", "show", "first"}, want: `"first" is not a dead letter's ID`},
		{args: []string{"dlq", "replay", "7", "--controller", "foo"}, want: "give a dead letter's ID or --controller, not both"},
		{args: []string{"dlq", "replay"}, want: "give a dead letter's ID or --controller\n"},
		{args: []string{"dlq", "nosuch"}, want: `unknown command "nosuch" for "uc dlq"`},
		{args: []string{"help", "nosuch"}, want: `unknown help topic "nosuch"`},
		{args: []string{"help", "dlq", "nosuch"}, want: `unknown help topic "dlq nosuch"`},
		{args: []string{"validate"}, want: "requires at least 1 arg"},
		{args: []string{"validate", "no-such-file.yaml"}, want: "no such file"},
		{args: []string{"init", "greeting"}, want: `kind "greeting": want a name in CamelCase`},
		{args: []string{"init"}, want: "accepts between 1 and 2 arg"},
		{args: []string{"resync"}, want: "give a parent, KIND/NAME, or --controller"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			out := runUC(t, tc.args...)
			if out.code != 2 || !strings.Contains(out.stderr, tc.want) || !strings.Contains(out.stderr, "--help") {
				t.Errorf("exit %d, stderr %q; want 2, %q and where help is", out.code, out.stderr, tc.want)
			}
		})
	}
}

// TestWrongUsageExits2: across uc's whole command tree, as it runs (with
// cobra's help and completion commands), wrong usage exits 2 and says
// where help is: an unknown flag to every command that runs, a number of
// arguments its Args refuses (every command that runs declares Args, so
// that one without cannot take stray words silently), and a word that is
// none of a group's commands. A refused command line fails before the
// command runs, so none of them starts a role here.
func TestWrongUsageExits2(t *testing.T) {
	wrong := func(t *testing.T, args ...string) {
		t.Helper()
		out := runUC(t, args...)
		if out.code != 2 || !strings.Contains(out.stderr, "uc: ") || !strings.Contains(out.stderr, "--help' for usage") {
			t.Errorf("uc %s: exit %d, stderr %q; want 2, the error and where help is", strings.Join(args, " "), out.code, out.stderr)
		}
	}
	root := newCLI()
	for _, c := range subcommands(root) {
		path := commandPath(c)
		if c.Hidden {
			continue // cobra's __complete, which the shells call: it takes any word
		}
		t.Run(strings.Join(path, " "), func(t *testing.T) {
			if c.HasSubCommands() {
				wrong(t, append(path, "nosuch")...)
			}
			if !c.Runnable() {
				return
			}
			wrong(t, append(path, "--no-such-flag")...)
			if c.Args == nil {
				t.Fatalf("uc %s declares no Args: it would take any word", strings.Join(path, " "))
			}
			for n := range 4 {
				if args := slices.Repeat([]string{"x"}, n); c.ValidateArgs(args) != nil {
					wrong(t, append(path, args...)...)
				}
			}
		})
	}
}

// TestEnv: every flag of every command is set by its UC_* variable, unless
// the command line sets it.
func TestEnv(t *testing.T) {
	// A value of each flag type, unlike any default.
	values := map[string]string{"string": "from-env", "int": "7", "int64": "7", "float64": "7.5", "bool": "true", "duration": "7s",
		"stringArray": "from-env"}
	for _, c := range subcommands(newRootCommand()) {
		c.Flags().VisitAll(func(f *pflag.Flag) {
			if f.Name == "help" {
				return
			}
			t.Run(strings.Join(commandPath(c), " ")+" --"+f.Name, func(t *testing.T) {
				v, ok := values[f.Value.Type()]
				if !ok {
					t.Fatalf("no test value for a flag of type %s", f.Value.Type())
				}
				env := f.Annotations[envAnnotation][0]
				t.Setenv(env, v)
				cmd, _, err := newRootCommand().Find(commandPath(c))
				if err != nil {
					t.Fatal(err)
				}
				if err := setFromEnv(cmd.Flags()); err != nil {
					t.Fatal(err)
				}
				want := v
				if f.Value.Type() == "stringArray" {
					want = "[" + v + "]" // one value of a repeatable flag
				}
				if got := cmd.Flags().Lookup(f.Name).Value.String(); got != want {
					t.Errorf("%s=%s set --%s to %q", env, v, f.Name, got)
				}
			})
		})
	}

	t.Run("a variable means one thing", func(t *testing.T) {
		// A variable exported for one command is read by every command
		// with a flag bound to it: those flags must take the same kind of
		// value (UC_CONTROLLER is a controller's name, never a file).
		types := map[string]string{}
		for _, c := range subcommands(newRootCommand()) {
			c.Flags().VisitAll(func(f *pflag.Flag) {
				env := f.Annotations[envAnnotation][0]
				if seen, ok := types[env]; ok && seen != f.Value.Type() {
					t.Errorf("%s sets a %s flag and a %s flag (uc %s --%s)", env, seen, f.Value.Type(), strings.Join(commandPath(c), " "), f.Name)
				}
				types[env] = f.Value.Type()
			})
		}
	})
	t.Run("the command line wins", func(t *testing.T) {
		t.Setenv("UC_CONTROLLERS", "from-env")
		out := runUC(t, "nats-config", "--controllers", "from-args")
		if out.code != 0 || !strings.Contains(out.stdout, "hook-from-args") || strings.Contains(out.stdout, "from-env") {
			t.Errorf("exit %d; want the users of the command line's controller only:\n%s%s", out.code, out.stdout, out.stderr)
		}
	})
	t.Run("a variable sets a flag of the command run", func(t *testing.T) {
		t.Setenv("UC_CONTROLLERS", "from-env")
		out := runUC(t, "nats-config")
		if out.code != 0 || !strings.Contains(out.stdout, "hook-from-env") {
			t.Errorf("exit %d; want the users of UC_CONTROLLERS's controller:\n%s%s", out.code, out.stdout, out.stderr)
		}
	})
}

// TestVersion: uc version and uc --version print the version, commit and
// date, the same.
func TestVersion(t *testing.T) {
	version := runUC(t, "version")
	flag := runUC(t, "--version")
	if version.code != 0 || flag.code != 0 || version.stdout != flag.stdout {
		t.Fatalf("uc version: exit %d\n%s\nuc --version: exit %d\n%s", version.code, version.stdout, flag.code, flag.stdout)
	}
	for _, want := range []string{"uc ", "\ncommit: ", "\ndate: ", "\ngo: ", "go1."} {
		if !strings.Contains(version.stdout, want) {
			t.Errorf("uc version does not say %q:\n%s", want, version.stdout)
		}
	}
}

// TestLogFormat: --log-format json makes every line a JSON object, text
// every line logfmt — client-go's klog lines too.
func TestLogFormat(t *testing.T) {
	for _, tc := range []struct {
		format string
		parse  func(line string) (msg string, err error)
	}{
		{"json", func(line string) (string, error) {
			var rec struct{ Msg string }
			err := json.Unmarshal([]byte(line), &rec)
			return rec.Msg, err
		}},
		{"text", func(line string) (string, error) {
			_, msg, ok := strings.Cut(line, " msg=")
			if !strings.HasPrefix(line, "time=") || !ok {
				return "", errors.New("no time= and msg=")
			}
			msg, _, _ = strings.Cut(strings.Trim(msg, `"`), `"`)
			return msg, nil
		}},
	} {
		t.Run(tc.format, func(t *testing.T) {
			t.Cleanup(restoreLoggers())
			var buf bytes.Buffer
			log, err := logOptions{level: "info", format: tc.format}.logger(&buf)
			if err != nil {
				t.Fatal(err)
			}
			log.Info("from slog", "controller", "c")
			klog.InfoS("from klog", "pod", "ns/p")
			klog.Errorf("from klog %s", "formatted")
			slog.Info("from slog's default")
			lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
			var msgs []string
			for _, line := range lines {
				msg, err := tc.parse(line)
				if err != nil {
					t.Errorf("not %s: %q", tc.format, line)
				}
				msgs = append(msgs, msg)
			}
			want := []string{"from slog", "from klog", "from klog formatted", "from slog's default"}
			if !slices.Equal(msgs, want) {
				t.Errorf("messages %q, want %q; log:\n%s", msgs, want, buf.String())
			}
		})
	}
}

// restoreLoggers undoes what logOptions.logger sets for the process.
func restoreLoggers() func() {
	def := slog.Default()
	return func() {
		slog.SetDefault(def)
		klog.ClearLogger()
	}
}

// TestFailureLogged: a role that fails logs why in --log-format and exits 1.
func TestFailureLogged(t *testing.T) {
	t.Cleanup(restoreLoggers())
	out := runUC(t, "run", "--kubeconfig", t.TempDir()+"/no-such-kubeconfig", "--log-format", "json")
	var rec struct{ Msg, Err string }
	if err := json.Unmarshal([]byte(strings.TrimSpace(out.stderr)), &rec); err != nil || out.code != 1 ||
		rec.Msg != "uc stopped" || !strings.Contains(rec.Err, "no-such-kubeconfig") {
		t.Errorf("exit %d, stderr %q; want 1 and one JSON line saying why", out.code, out.stderr)
	}
}
