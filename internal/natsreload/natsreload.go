// Package natsreload keeps a NATS server's users' passwords and TLS
// certificates current without a restart, as the official NATS chart's
// config reloader does: it renders the users' configuration with the
// passwords of mounted files, and when a file changes (a Secret or
// ConfigMap updated, a certificate renewed), renders it again and signals
// the server (SIGHUP, by its pid file) to reload its configuration.
//
// nats-server resolves a variable ($UC_NATS_PASSWORD_UC_WATCHER) from the
// file it parses or from its environment, which is fixed when the process
// starts: so the passwords go into the rendered file itself, variables
// defined above the users that refer to them (Render).
package natsreload

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/spf13/pflag"
)

// Config says what the reloader renders, watches and signals.
type Config struct {
	// AuthConf is the users' configuration (`uc nats-config`), whose
	// passwords are variables.
	AuthConf string
	// PasswordsDir holds a file per variable (a Secret's keys): its name
	// the variable's, its content the password.
	PasswordsDir string
	// Out is the rendered file: the variables, then AuthConf.
	Out string
	// Require are files that must exist, such as the servers' certificate
	// and key: without them the server could not start.
	Require []string
	// Watch are more directories whose changes make the server reload,
	// such as its certificates'.
	Watch []string
	// PidFile is nats-server's pid_file.
	PidFile string
	// Interval is how often the files are read again even without a
	// change notification; 0: never.
	Interval time.Duration
}

// RegisterFlags registers the flags of uc nats-reloader, which set c.
func (c *Config) RegisterFlags(f *pflag.FlagSet) {
	f.StringVar(&c.AuthConf, "auth-conf", "/etc/nats/config/auth.conf", "the NATS users, their passwords variables (uc nats-config)")
	f.StringVar(&c.PasswordsDir, "passwords-dir", "/etc/nats/passwords", "a file per password variable, the password its content")
	f.StringVar(&c.Out, "out", "/etc/nats/auth/auth.conf", "the rendered users, which nats.conf includes")
	f.StringVar(&c.PidFile, "pid-file", "/var/run/nats/nats.pid", "the NATS server's pid_file")
	f.StringArrayVar(&c.Require, "require", nil, "a file the server cannot start without, such as its certificate (repeatable)")
	f.StringArrayVar(&c.Watch, "watch", nil, "a directory whose changes make the server reload, such as its certificates' (repeatable)")
	f.DurationVar(&c.Interval, "interval", time.Minute, "read the files again this often even without a change notification; 0: never")
}

// variable is a reference to a variable in a nats-server configuration,
// once its quoted strings ("$JS.API.>" is a subject) and comments are
// left out (references).
var variable = regexp.MustCompile(`\$([A-Za-z_][A-Za-z0-9_]*)`)

// quoted is a quoted string of a nats-server configuration.
var quoted = regexp.MustCompile(`"(?:[^"\\\n]|\\.)*"|'[^'\n]*'`)

// Render is the users' configuration with the passwords it refers to
// defined above it, each from its file in the passwords directory. A
// variable without a file is left to the server's environment, where it
// must then be; a file no variable refers to is left out (nats-server
// takes an unused top-level key for a misspelt setting).
func (c Config) Render() ([]byte, error) {
	auth, err := os.ReadFile(c.AuthConf)
	if err != nil {
		return nil, fmt.Errorf("read the users: %w", err)
	}
	for _, f := range c.Require {
		if _, err := os.Stat(f); err != nil {
			return nil, fmt.Errorf("the NATS server needs %s (is its Secret missing a key?): %w", f, err)
		}
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Rendered by uc nats-reloader from %s and the passwords of %s.\n", c.AuthConf, c.PasswordsDir)
	var names []string
	for _, m := range variable.FindAllSubmatch(references(auth), -1) {
		names = append(names, string(m[1]))
	}
	slices.Sort(names)
	for _, name := range slices.Compact(names) {
		pw, err := os.ReadFile(filepath.Join(c.PasswordsDir, name))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if _, ok := os.LookupEnv(name); !ok {
				return nil, fmt.Errorf("%s refers to $%s: no file %s in %s, nor a variable of the environment", c.AuthConf, name, name, c.PasswordsDir)
			}
			continue
		case err != nil:
			return nil, fmt.Errorf("read the password %s: %w", name, err)
		}
		fmt.Fprintf(&b, "%s: %s\n", name, Quote(strings.TrimRight(string(pw), "\r\n")))
	}
	b.Write(auth)
	return b.Bytes(), nil
}

// references is a configuration without its comment lines and quoted
// strings, whose words are no references.
func references(conf []byte) []byte {
	var out [][]byte
	for line := range bytes.Lines(conf) {
		if t := bytes.TrimSpace(line); !bytes.HasPrefix(t, []byte("#")) && !bytes.HasPrefix(t, []byte("//")) {
			out = append(out, quoted.ReplaceAll(line, nil))
		}
	}
	return bytes.Join(out, nil)
}

// Quote is s as a nats-server configuration string: double-quoted, with
// a backslash and a quote escaped, and every byte outside printable ASCII
// as \xHH.
func Quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := range len(s) {
		switch c := s[i]; {
		case c == '\\' || c == '"':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c >= 0x7f:
			fmt.Fprintf(&b, `\x%02x`, c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// Write renders Out if what it renders differs from what it holds, and
// reports whether it changed. The file is replaced at once (renamed), so
// that the server never reads half of it.
func (c Config) Write() (changed bool, err error) {
	b, err := c.Render()
	if err != nil {
		return false, err
	}
	if old, err := os.ReadFile(c.Out); err == nil && bytes.Equal(old, b) {
		return false, nil
	}
	tmp, err := os.CreateTemp(filepath.Dir(c.Out), ".render-*")
	if err != nil {
		return false, fmt.Errorf("render %s: %w", c.Out, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return false, fmt.Errorf("render %s: %w", c.Out, err)
	}
	if err := tmp.Close(); err != nil {
		return false, fmt.Errorf("render %s: %w", c.Out, err)
	}
	if err := os.Rename(tmp.Name(), c.Out); err != nil {
		return false, fmt.Errorf("render %s: %w", c.Out, err)
	}
	return true, nil
}

// fingerprint is a digest of the watched directories' files: the server
// reloads when it changes.
func (c Config) fingerprint() ([32]byte, error) {
	h := sha256.New()
	for _, dir := range c.Watch {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return [32]byte{}, fmt.Errorf("read %s: %w", dir, err)
		}
		for _, e := range entries {
			// A mounted volume's files are links to its current ..data.
			b, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil || strings.HasPrefix(e.Name(), "..") {
				continue
			}
			fmt.Fprintf(h, "%s\x00%d\x00", e.Name(), len(b))
			h.Write(b)
		}
	}
	return [32]byte(h.Sum(nil)), nil
}

// Signal asks the server of the pid file to reload its configuration.
func (c Config) Signal() (pid int, err error) {
	b, err := os.ReadFile(c.PidFile)
	if err != nil {
		return 0, fmt.Errorf("read the NATS server's pid file: %w", err)
	}
	pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("pid file %s: %w", c.PidFile, err)
	}
	if err := syscall.Kill(pid, syscall.SIGHUP); err != nil {
		return pid, fmt.Errorf("signal the NATS server (pid %d) to reload: %w", pid, err)
	}
	return pid, nil
}

// Run renders Out, then watches the users' configuration, the passwords
// and the Watch directories until ctx ends: when any changes, it renders
// Out again and signals the server to reload. A failed render or signal
// is logged and tried again at the next change (or Interval); the server
// keeps its configuration meanwhile.
func (c Config) Run(ctx context.Context, log *slog.Logger) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch files: %w", err)
	}
	defer w.Close()
	for _, dir := range append([]string{filepath.Dir(c.AuthConf), c.PasswordsDir}, c.Watch...) {
		if err := w.Add(dir); err != nil {
			return fmt.Errorf("watch %s: %w", dir, err)
		}
	}
	if _, err := c.Write(); err != nil {
		return err
	}
	last, err := c.fingerprint()
	if err != nil {
		return err
	}
	log.Info("watching the NATS server's users, passwords and certificates", "out", c.Out, "watch", c.Watch, "pidFile", c.PidFile)
	var tick <-chan time.Time
	if c.Interval > 0 {
		t := time.NewTicker(c.Interval)
		defer t.Stop()
		tick = t.C
	}
	// A volume's update is several events: act once they settle.
	settle := time.NewTimer(time.Hour)
	settle.Stop()
	// pending: a change the server has not been signalled. A server that
	// runs already started from files older than these, perhaps: changed
	// before this reloader watched them (while it started, or restarted),
	// which no event will tell. It reloads once.
	_, err = os.Stat(c.PidFile)
	pending := err == nil
	if pending {
		settle.Reset(0)
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-w.Errors:
			log.Warn("watching files", "err", err)
		case <-w.Events:
			settle.Reset(200 * time.Millisecond)
			continue
		case <-settle.C:
		case <-tick:
		}
		changed, err := c.Write()
		if err != nil {
			log.Error("cannot render the NATS users; the server keeps its configuration", "err", err)
			continue
		}
		fp, err := c.fingerprint()
		if err != nil {
			log.Error("cannot read the NATS server's certificates", "err", err)
			continue
		}
		pending = pending || changed || fp != last
		last = fp
		if !pending {
			continue
		}
		pid, err := c.Signal()
		if err != nil {
			log.Error("cannot reload the NATS server", "err", err)
			continue
		}
		pending = false
		log.Info("NATS server reloading its configuration", "pid", pid)
	}
}
