package jsonschema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"testing"

	sjs "github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"

	"universalcontroller.dev/uc/schemas/bus"
)

// The validator lives in the tests only: uc's components never validate
// against these documents (they decode into the hooks types), so the JSON
// Schema library stays out of every binary and out of the Go worker SDK.

// compiled holds every embedded document compiled, by file name. Compiling
// also checks each document against the draft 2020-12 meta-schema.
var compiled = sync.OnceValues(func() (map[string]*sjs.Schema, error) {
	names, err := fs.Glob(files, "*.json")
	if err != nil {
		return nil, err
	}
	c := sjs.NewCompiler()
	for _, name := range names {
		b, err := files.ReadFile(name)
		if err != nil {
			return nil, err
		}
		doc, err := decodeJSON(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if err := c.AddResource(BaseURL+name, doc); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	out := map[string]*sjs.Schema{}
	for _, name := range names {
		sch, err := c.Compile(BaseURL + name)
		if err != nil {
			return nil, fmt.Errorf("compile %s: %w", name, err)
		}
		out[name] = sch
	}
	return out, nil
})

// Validate checks data, the JSON data of a CloudEvent of type ceType,
// against the schema For(ceType). A *sjs.ValidationError names the failing
// locations.
func Validate(ceType string, data []byte) error {
	name, ok := byType[ceType]
	if !ok {
		return fmt.Errorf("no JSON Schema for CloudEvent type %q", ceType)
	}
	schemas, err := compiled()
	if err != nil {
		return err
	}
	inst, err := decodeJSON(data)
	if err != nil {
		return fmt.Errorf("%s data: %w", ceType, err)
	}
	return schemas[name].Validate(inst)
}

// decodeJSON decodes exactly one JSON value, keeping numbers exact.
func decodeJSON(b []byte) (any, error) {
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

// failures lists the leaf errors of a validation error as
// "<instance JSON pointer> <keyword>", followed, for required and
// additionalProperties, by the properties in question: e.g.
// "/children/0 required kind", "/children additionalProperties Deployment".
func failures(err error) []string {
	var ve *sjs.ValidationError
	if !errors.As(err, &ve) {
		return nil
	}
	var out []string
	var walk func(*sjs.ValidationError)
	walk = func(e *sjs.ValidationError) {
		if len(e.Causes) == 0 {
			f := pointer(e.InstanceLocation) + " " + strings.Join(e.ErrorKind.KeywordPath(), "/")
			switch k := e.ErrorKind.(type) {
			case *kind.Required:
				f += " " + strings.Join(k.Missing, ",")
			case *kind.AdditionalProperties:
				f += " " + strings.Join(k.Properties, ",")
			case *kind.Not: // its keyword path is empty
				f += "not"
			}
			out = append(out, f)
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	slices.Sort(out)
	return out
}

// pointer is the JSON pointer (RFC 6901) of an instance location.
func pointer(loc []string) string {
	var sb strings.Builder
	for _, tok := range loc {
		sb.WriteByte('/')
		sb.WriteString(strings.NewReplacer("~", "~0", "/", "~1").Replace(tok))
	}
	return sb.String()
}

func TestSchemasCompile(t *testing.T) {
	if _, err := compiled(); err != nil {
		t.Fatal(err)
	}
}

// TestDocuments checks what the validator does not: each document declares
// draft 2020-12, its $id is BaseURL plus its file name, it has a title and a
// description, and it is the schema of at least one CloudEvent type.
func TestDocuments(t *testing.T) {
	names, err := fs.Glob(files, "*.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 5 {
		t.Errorf("embedded documents %v, want 5", names)
	}
	for _, name := range names {
		b, _ := files.ReadFile(name)
		var doc struct {
			Schema      string `json:"$schema"`
			ID          string `json:"$id"`
			Title       string `json:"title"`
			Description string `json:"description"`
		}
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if doc.Schema != "https://json-schema.org/draft/2020-12/schema" {
			t.Errorf("%s: $schema %q, want draft 2020-12", name, doc.Schema)
		}
		if doc.ID != BaseURL+name {
			t.Errorf("%s: $id %q, want %q", name, doc.ID, BaseURL+name)
		}
		if doc.Title == "" || doc.Description == "" {
			t.Errorf("%s: no title or description", name)
		}
		used := false
		for _, n := range byType {
			used = used || n == name
		}
		if !used {
			t.Errorf("%s is the schema of no CloudEvent type", name)
		}
	}
}

func TestFor(t *testing.T) {
	for _, typ := range Types() {
		b, ok := For(typ)
		if !ok || !json.Valid(b) {
			t.Errorf("For(%q) = %d bytes, %v", typ, len(b), ok)
		}
		if !strings.HasSuffix(typ, ".request") && !strings.HasSuffix(typ, ".response") && typ != bus.PlanType {
			t.Errorf("type %q is neither a request, a response nor a plan", typ)
		}
	}
	if len(Types()) != 7 {
		t.Errorf("Types() = %v, want a request and a response type for each of 3 hooks, and the plan", Types())
	}
	for _, typ := range []string{"", "dev.universalcontroller.sync", "dev.universalcontroller.other.request"} {
		if _, ok := For(typ); ok {
			t.Errorf("For(%q) found a schema", typ)
		}
	}
	same := func(a, b string) {
		x, _ := For(a)
		y, _ := For(b)
		if !bytes.Equal(x, y) {
			t.Errorf("%s and %s have different schemas", a, b)
		}
	}
	same("dev.universalcontroller.sync.request", "dev.universalcontroller.finalize.request")
	same("dev.universalcontroller.sync.response", "dev.universalcontroller.finalize.response")
}
