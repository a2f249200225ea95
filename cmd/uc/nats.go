package main

import (
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// startEmbeddedNATS starts a NATS server with JetStream file storage in dir,
// listening on listen ("host:port") for hook workers; on a free port when
// the port is 0. Its ClientURL is the address it took.
func startEmbeddedNATS(listen, dir string) (*server.Server, error) {
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
	ns.Start()
	if !ns.ReadyForConnections(30 * time.Second) {
		ns.Shutdown()
		return nil, fmt.Errorf("embedded NATS on %s did not start", listen)
	}
	return ns, nil
}
