// Package contracttest holds, in its tests, the tests of uc's standalone
// modules — the bus contract (schemas/bus) and the Go hook SDK (sdk/go/hook) —
// that need uc's own module: an embedded JetStream server with uc's
// streams and consumers (internal/bustest, internal/topology), the types
// the SDK's messages mirror (schemas/hooks, schemas/v1alpha1), and
// OpenTelemetry's SDK to record spans. Run here, they leave the standalone
// modules' requirements, which a hook's module inherits, to what their
// code needs.
package contracttest
