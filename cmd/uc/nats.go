package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// natsStartTimeout bounds the embedded server's start: it recovers its
// streams from the data directory before it listens.
const natsStartTimeout = 30 * time.Second

// startEmbeddedNATS starts a NATS server with JetStream file storage in dir,
// listening on listen ("host:port") for hook workers; on a free port when
// the port is 0. Its ClientURL is the address it took. The server logs
// through log: its warnings and errors (a port in use, a full disk) are
// uc's, and one it cannot go on after ends the start at once.
func startEmbeddedNATS(listen, dir string, log *slog.Logger) (*server.Server, error) {
	host, portStr, err := net.SplitHostPort(listen)
	if err != nil {
		return nil, fmt.Errorf("--nats-listen %q: %w", listen, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, fmt.Errorf("--nats-listen %q: %w", listen, err)
	}
	if port == 0 { // to nats-server, 0 is its default port, 4222
		port = server.RANDOM_PORT
	}
	ns, err := server.NewServer(&server.Options{
		ServerName: "uc-embedded",
		Host:       host,
		Port:       port,
		JetStream:  true,
		StoreDir:   dir,
		MaxPayload: 8 << 20, // a request carries a parent's whole observed state
		NoSigs:     true,
	})
	if err != nil {
		return nil, fmt.Errorf("embedded NATS: %w", err)
	}
	logs := &natsLog{log: log, fatal: make(chan error, 1)}
	ns.SetLoggerV2(logs, false, false, false)
	ns.Start()
	deadline := time.Now().Add(natsStartTimeout)
	for !ns.ReadyForConnections(100 * time.Millisecond) {
		select {
		case err := <-logs.fatal:
			ns.Shutdown()
			return nil, fmt.Errorf("embedded NATS on %s: %w", listen, err)
		default:
		}
		if time.Now().After(deadline) {
			ns.Shutdown()
			return nil, fmt.Errorf("embedded NATS on %s did not start within %s", listen, natsStartTimeout)
		}
	}
	return ns, nil
}

// natsLog is the embedded server's logger: its notices (a start-up banner)
// at debug level, its warnings and errors as uc's, and its fatal errors —
// which nats-server's own logger ends the process on — as errors, the
// first of them also sent to fatal.
type natsLog struct {
	log   *slog.Logger
	fatal chan error
}

func (l *natsLog) Noticef(format string, v ...any) { l.log.Debug(fmt.Sprintf(format, v...)) }
func (l *natsLog) Warnf(format string, v ...any)   { l.log.Warn(fmt.Sprintf(format, v...)) }
func (l *natsLog) Errorf(format string, v ...any)  { l.log.Error(fmt.Sprintf(format, v...)) }
func (l *natsLog) Debugf(format string, v ...any)  { l.log.Debug(fmt.Sprintf(format, v...)) }
func (l *natsLog) Tracef(format string, v ...any)  { l.log.Debug(fmt.Sprintf(format, v...)) }

func (l *natsLog) Fatalf(format string, v ...any) {
	msg := fmt.Sprintf(format, v...)
	l.log.Error(msg)
	select {
	case l.fatal <- errors.New(msg):
	default:
	}
}
