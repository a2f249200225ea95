package bus

import (
	"errors"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// CheckEvery is how often a role checks that the consumers and buckets it
// depends on exist. A NATS server restarted on its files has lost every
// consumer whose state was in memory; no client hears of it.
const CheckEvery = 5 * time.Second

// ConsumerLost tells whether an error reported while consuming says the
// consumer may be gone: deleted (the server ends the pulls), not found, or
// silent — pulls without heartbeats, as after a NATS restart that lost it.
// Check the consumer then.
func ConsumerLost(err error) bool {
	return errors.Is(err, jetstream.ErrConsumerDeleted) || errors.Is(err, jetstream.ErrConsumerNotFound) ||
		errors.Is(err, jetstream.ErrNoHeartbeat)
}
