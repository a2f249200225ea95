// Package jsonschema holds the JSON Schemas (draft 2020-12) of the data of
// every CloudEvent uc puts on the bus, one document per message shape:
//
//	sync-request.json        dev.universalcontroller.sync.request, dev.universalcontroller.finalize.request
//	sync-response.json       dev.universalcontroller.sync.response, dev.universalcontroller.finalize.response
//	customize-request.json   dev.universalcontroller.customize.request
//	customize-response.json  dev.universalcontroller.customize.response
//	plan.json                dev.universalcontroller.plan
//
// The documents are written by hand and checked in; they describe the JSON of
// the Go types in package hooks (and bus.Plan), and this package's tests
// validate real values of those types against them. Hook authors in other languages can
// use the files directly; docs/bus.md describes the rest of the wire
// contract.
//
// The package only serves the documents. It deliberately has no validator:
// uc's components decode replies into the hooks types and check them there,
// so a JSON Schema library is a dependency of this package's tests only.
package jsonschema

import (
	"embed"
	"io/fs"
	"maps"
	"slices"

	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
)

// BaseURL is the prefix of every document's $id; the rest is its file name.
const BaseURL = "https://universalcontroller.dev/schemas/"

// The file names of the documents.
const (
	syncRequestFile       = "sync-request.json"
	syncResponseFile      = "sync-response.json"
	customizeRequestFile  = "customize-request.json"
	customizeResponseFile = "customize-response.json"
	planFile              = "plan.json"
)

//go:embed *.json
var files embed.FS

// byType maps each CloudEvent type to the file of its data's schema.
var byType = map[string]string{
	bus.RequestType(hooks.Sync):       syncRequestFile,
	bus.ResponseType(hooks.Sync):      syncResponseFile,
	bus.RequestType(hooks.Finalize):   syncRequestFile,
	bus.ResponseType(hooks.Finalize):  syncResponseFile,
	bus.RequestType(hooks.Customize):  customizeRequestFile,
	bus.ResponseType(hooks.Customize): customizeResponseFile,
	bus.PlanType:                      planFile,
}

// For returns the JSON Schema of the data of CloudEvents of type ceType, or
// false when uc defines no such type.
func For(ceType string) ([]byte, bool) {
	name, ok := byType[ceType]
	if !ok {
		return nil, false
	}
	b, err := files.ReadFile(name)
	return b, err == nil
}

// FileOf returns the file name of the schema of the data of CloudEvents of
// type ceType in Documents, or false when uc defines no such type.
func FileOf(ceType string) (string, bool) {
	name, ok := byType[ceType]
	return name, ok
}

// Documents are every document, by file name: a document's $refs name
// others by BaseURL plus their file name.
func Documents() fs.FS { return files }

// Types returns every CloudEvent type that has a schema, sorted.
func Types() []string { return slices.Sorted(maps.Keys(byType)) }
