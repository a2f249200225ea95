// Package schemacheck validates the data of uc's CloudEvents against their
// JSON Schemas (schemas/jsonschema), for tests: the contract's own tests
// validate Go values of the hooks types, and a role's tests validate what
// the role makes (the applier's plans). uc's components never validate
// against the documents, so no binary imports this package and the JSON
// Schema library stays a dependency of tests only.
package schemacheck

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sync"

	sjs "github.com/santhosh-tekuri/jsonschema/v6"
)

// Validator validates against a set of documents.
type Validator struct {
	fileOf   func(ceType string) (string, bool)
	compiled func() (map[string]*sjs.Schema, error)
}

// New is a validator of the documents in docs (every *.json, each with
// the $id baseURL plus its file name); fileOf names the document of a
// CloudEvent type (jsonschema.Documents and jsonschema.FileOf).
func New(docs fs.FS, baseURL string, fileOf func(ceType string) (string, bool)) *Validator {
	return &Validator{fileOf: fileOf, compiled: sync.OnceValues(func() (map[string]*sjs.Schema, error) {
		return compile(docs, baseURL)
	})}
}

// compile compiles every document in docs, which also checks each against
// the draft 2020-12 meta-schema.
func compile(docs fs.FS, baseURL string) (map[string]*sjs.Schema, error) {
	names, err := fs.Glob(docs, "*.json")
	if err != nil {
		return nil, err
	}
	c := sjs.NewCompiler()
	for _, name := range names {
		b, err := fs.ReadFile(docs, name)
		if err != nil {
			return nil, err
		}
		doc, err := DecodeJSON(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if err := c.AddResource(baseURL+name, doc); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	out := map[string]*sjs.Schema{}
	for _, name := range names {
		sch, err := c.Compile(baseURL + name)
		if err != nil {
			return nil, fmt.Errorf("compile %s: %w", name, err)
		}
		out[name] = sch
	}
	return out, nil
}

// Compile compiles every document, checking it against the meta-schema.
func (v *Validator) Compile() error {
	_, err := v.compiled()
	return err
}

// Validate checks data, the JSON data of a CloudEvent of type ceType,
// against its document. A *sjs.ValidationError names the failing
// locations.
func (v *Validator) Validate(ceType string, data []byte) error {
	name, ok := v.fileOf(ceType)
	if !ok {
		return fmt.Errorf("no JSON Schema for CloudEvent type %q", ceType)
	}
	schemas, err := v.compiled()
	if err != nil {
		return err
	}
	inst, err := DecodeJSON(data)
	if err != nil {
		return fmt.Errorf("%s data: %w", ceType, err)
	}
	return schemas[name].Validate(inst)
}

// DecodeJSON decodes exactly one JSON value, keeping numbers exact.
func DecodeJSON(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := d.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("trailing data after the JSON value")
	}
	return v, nil
}
