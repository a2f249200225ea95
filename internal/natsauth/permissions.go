package natsauth

import (
	"slices"

	"universalcontroller.dev/uc/internal/topology"
)

// userOf is the user name, receiving its responses under inbox, allowed
// exactly what the role does: the JetStream API subjects of what it
// creates, waits for, reads, consumes, writes and deletes, the subjects it
// publishes on, and those it listens to.
func userOf(name, inbox string, r topology.Role) User {
	var pub []string
	for _, s := range r.Creates.Streams {
		pub = append(pub, streamInfo(s.Name), "$JS.API.STREAM.CREATE."+s.Name, "$JS.API.STREAM.UPDATE."+s.Name)
	}
	for _, c := range r.Creates.Consumers {
		pub = append(pub, consumerAPI("INFO", c), consumerAPI("CREATE", c), consumerAPI("DURABLE.CREATE", c))
		if c.Name() != "" { // a filter subject may follow the name
			pub = append(pub, consumerAPI("CREATE", c)+".>")
		}
	}
	if len(r.Creates.Buckets) > 0 {
		// Creating a bucket reads the account's JetStream limits first.
		pub = append(pub, "$JS.API.INFO")
	}
	for _, b := range r.Creates.Buckets {
		s := b.Stream()
		pub = append(pub, streamInfo(s), "$JS.API.STREAM.CREATE."+s, "$JS.API.STREAM.UPDATE."+s)
	}
	for _, s := range r.WaitsFor.Streams {
		pub = append(pub, streamInfo(s.Name))
	}
	for _, c := range r.WaitsFor.Consumers {
		pub = append(pub, consumerAPI("INFO", c))
	}
	for _, b := range r.WaitsFor.Buckets {
		pub = append(pub, streamInfo(b.Stream()))
	}
	for _, s := range r.Reads.Streams {
		pub = append(pub, streamInfo(s.Name), "$JS.API.STREAM.MSG.GET."+s.Name)
	}
	for _, c := range r.Reads.Consumers {
		pub = append(pub, consumerAPI("INFO", c))
	}
	for _, b := range r.Reads.Buckets {
		s := b.Stream()
		pub = append(pub, streamInfo(s), "$JS.API.DIRECT.GET."+s+".>", "$JS.API.STREAM.MSG.GET."+s)
	}
	for _, c := range r.Consumes {
		pub = append(pub, consumerAPI("INFO", c), consumerAPI("MSG.NEXT", c), ackAPI(c))
	}
	for _, b := range r.Writes {
		s := b.Stream()
		pub = append(pub, "$KV."+b.Name+".>",
			// Listing keys runs an ordered consumer, acknowledging flow
			// control on $JS.FC.
			"$JS.API.CONSUMER.CREATE."+s+".>", "$JS.API.CONSUMER.DELETE."+s+".>", "$JS.FC."+s+".>")
	}
	for _, c := range r.Deletes {
		pub = append(pub, consumerAPI("DELETE", c))
	}
	for _, s := range r.DeletesMessagesOf {
		pub = append(pub, "$JS.API.STREAM.MSG.DELETE."+s.Name)
	}
	pub = append(pub, r.Publishes...)
	slices.Sort(pub)
	return User{
		Name:      name,
		About:     r.About,
		Publish:   slices.Compact(pub),
		Subscribe: append([]string{inbox + ".>"}, r.Listens...),
		Responses: r.Answers,
	}
}

// consumerAPI is the subject of a JetStream API call on the consumer, or
// on every consumer of its stream.
func consumerAPI(call string, c topology.Consumer) string {
	return "$JS.API.CONSUMER." + call + "." + c.Stream + "." + nameOrAll(c)
}

// ackAPI is the subject of acknowledging the consumer's messages.
func ackAPI(c topology.Consumer) string {
	if c.Name() == "" {
		return "$JS.ACK." + c.Stream + ".>"
	}
	return "$JS.ACK." + c.Stream + "." + c.Name() + ".>"
}

// nameOrAll is the consumer's name, or the wildcard of every consumer of
// its stream.
func nameOrAll(c topology.Consumer) string {
	if c.Name() == "" {
		return ">"
	}
	return c.Name()
}

// streamInfo is reading a stream's configuration and state.
func streamInfo(stream string) string { return "$JS.API.STREAM.INFO." + stream }
