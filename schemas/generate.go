// Package schemas is uc's public contract: the Go types of the
// universalcontroller.dev API (v1alpha1), the CustomResourceDefinition
// manifests generated from them (crds), the hook request and response
// messages (hooks) and the names used on the NATS bus (bus).
//
// The generated files are checked in. After changing a type or a marker in
// v1alpha1, regenerate them with
//
//	go generate ./schemas/...
//
// and commit the result; this package's test fails while they are stale.
// controller-gen is pinned, with its dependencies, in the separate module
// hack/tools/gen, so it never enters uc's go.mod.
package schemas

//go:generate go tool -modfile=../hack/tools/gen/go.mod controller-gen crd paths=./... output:crd:dir=./crds
