// Package webhook calls a hook over HTTP: a Metacontroller webhook (the
// request as plain JSON, the reply the 200 response's body), with the
// connection's TLS and authorization read from Secrets and ConfigMaps and
// ETag caching, or a destination (a Knative Addressable or a URL) with the
// request as a CloudEvent. The dispatcher serves its handlers on the bus;
// uc render calls them directly.
package webhook
