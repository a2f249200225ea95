package bus

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/nats-io/nats.go"
)

// Connection says how to reach NATS: the servers, the credentials and TLS.
// uc's roles and the Go SDK's hook.Main fill it from the same flags.
type Connection struct {
	URL string
	// Creds is a credentials file (a user JWT and its NKey seed).
	Creds string
	// User and Password, or Token, authenticate with a server configured
	// with users (see `uc nats-config`).
	User, Password, Token string
	// PasswordFile holds the password of User instead of Password: read at
	// every connection, so that a client reconnecting after the password
	// was rotated (the file replaced, as a mounted Secret is) uses the new
	// one.
	PasswordFile string
	// TLSCA is the CA bundle that verifies the server; TLSCert and TLSKey
	// are a client certificate, for servers that verify clients. Each is
	// read again at every connection: a renewed one is used on reconnect.
	TLSCA, TLSCert, TLSKey string
	// InboxPrefix is where the client receives responses; a server that
	// gives each user its own inbox prefix refuses any other. hook.Run sets the
	// controller's (HookInbox) when empty.
	InboxPrefix string
}

// RegisterFlags registers the credential and TLS flags: --nats-creds,
// --nats-user, --nats-password, --nats-password-file, --nats-token, --nats-tls-ca,
// --nats-tls-cert, --nats-tls-key. A flag's default is def(its name).
func (c *Connection) RegisterFlags(fs *flag.FlagSet, def func(name string) string) {
	for _, f := range []struct {
		p          *string
		name, help string
	}{
		{&c.Creds, "nats-creds", "NATS credentials file (user JWT and NKey seed)"},
		{&c.User, "nats-user", "NATS user name"},
		{&c.Password, "nats-password", "NATS password of --nats-user"},
		{&c.PasswordFile, "nats-password-file", "file holding the NATS password of --nats-user, read again at every reconnection (a rotated password)"},
		{&c.Token, "nats-token", "NATS authentication token"},
		{&c.TLSCA, "nats-tls-ca", "CA certificates (PEM) that verify the NATS servers; enables TLS"},
		{&c.TLSCert, "nats-tls-cert", "client certificate (PEM) for NATS servers that verify clients; needs --nats-tls-key"},
		{&c.TLSKey, "nats-tls-key", "private key (PEM) of --nats-tls-cert"},
	} {
		fs.StringVar(f.p, f.name, def(f.name), f.help)
	}
}

// Options are the nats.go options of the credentials and TLS, checked.
func (c Connection) Options() ([]nats.Option, error) {
	var opts []nats.Option
	auths := 0
	if c.Creds != "" {
		auths++
		opts = append(opts, nats.UserCredentials(c.Creds))
	}
	switch {
	case c.Password != "" && c.PasswordFile != "":
		return nil, errors.New("give --nats-password or --nats-password-file, not both")
	case (c.Password != "" || c.PasswordFile != "") && c.User == "":
		return nil, errors.New("--nats-password and --nats-password-file need --nats-user")
	case c.PasswordFile != "":
		auths++
		opts = append(opts, nats.UserInfoHandler(c.passwordFromFile))
		if _, err := readPassword(c.PasswordFile); err != nil {
			return nil, err
		}
	case c.User != "":
		auths++
		opts = append(opts, nats.UserInfo(c.User, c.Password))
	}
	if c.Token != "" {
		auths++
		opts = append(opts, nats.Token(c.Token))
	}
	if auths > 1 {
		return nil, errors.New("give one of --nats-creds, --nats-user or --nats-token")
	}
	if c.Creds != "" || c.PasswordFile != "" {
		// Credentials read from a file at each attempt: when a server takes
		// a rotated password before this Pod's file has it, its attempts
		// are refused until the file is replaced. nats.go gives up for good
		// after two refusals by the same server; keep trying instead.
		opts = append(opts, nats.IgnoreAuthErrorAbort())
	}
	if c.TLSCA != "" {
		opts = append(opts, nats.RootCAs(c.TLSCA))
	}
	switch {
	case c.TLSCert != "" && c.TLSKey != "":
		opts = append(opts, nats.ClientCert(c.TLSCert, c.TLSKey))
	case c.TLSCert != "" || c.TLSKey != "":
		return nil, errors.New("--nats-tls-cert and --nats-tls-key go together")
	}
	if c.InboxPrefix != "" {
		opts = append(opts, nats.CustomInboxPrefix(c.InboxPrefix))
	}
	return opts, nil
}

// passwordFromFile is User and the password of PasswordFile, for a
// connection attempt; unreadable, an empty password the server refuses
// (the attempt is logged as refused, and retried).
func (c Connection) passwordFromFile() (user, password string) {
	password, _ = readPassword(c.PasswordFile)
	return c.User, password
}

// readPassword is the content of a password file, without a final line
// break.
func readPassword(file string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("read the NATS password: %w", err)
	}
	return strings.TrimRight(string(b), "\r\n"), nil
}

// Connect connects to c.URL as name, reconnecting forever. Errors the
// server reports on the connection (a permissions violation: the user may
// not use a subject) are logged, and passed to onError if it is not nil.
func (c Connection) Connect(name string, log *slog.Logger, onError func(error)) (*nats.Conn, error) {
	if c.URL == "" {
		return nil, errors.New("no NATS URL")
	}
	opts, err := c.Options()
	if err != nil {
		return nil, err
	}
	opts = append(opts, nats.Name(name), nats.MaxReconnects(-1),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			attrs := []any{"err", err}
			if sub != nil {
				attrs = append(attrs, "subscription", sub.Subject)
			}
			if errors.Is(err, nats.ErrPermissionViolation) {
				attrs = append(attrs, "user", c.User)
			}
			log.Error("NATS refused an operation", attrs...)
			if onError != nil {
				onError(err)
			}
		}))
	nc, err := nats.Connect(c.URL, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to NATS at %s: %w", c.URL, err)
	}
	return nc, nil
}

// UntilClosed waits, from now, until ctx ends (nil) or nc closes before
// it, for good: told to reconnect forever, nats.go still gives up when a
// server refused twice credentials that cannot change (a password or token
// given as a flag or an environment variable, not read from a file). A
// process without its bus serves nothing; its caller should exit with the
// error, so that its supervisor starts it again with the credentials it
// has by then (a Pod's environment is read again from its Secret).
func UntilClosed(nc *nats.Conn) func(ctx context.Context) error {
	closed := nc.StatusChanged(nats.CLOSED)
	return func(ctx context.Context) error {
		defer nc.RemoveStatusListener(closed)
		select {
		case <-ctx.Done():
			return nil
		case <-closed:
			if ctx.Err() != nil { // closed because ctx ended
				return nil
			}
			return fmt.Errorf("nothing left to serve (last error: %v): %w", nc.LastError(), nats.ErrConnectionClosed)
		}
	}
}
