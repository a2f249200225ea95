package contracttest

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"slices"
	"strings"
	"testing"

	sjs "github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"

	"universalcontroller.dev/uc/internal/schemacheck"
	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/jsonschema"
)

// validator validates against this package's documents.
var validator = schemacheck.New(jsonschema.Documents(), jsonschema.BaseURL, jsonschema.FileOf)

// Validate checks data against the schema of ceType.
func Validate(ceType string, data []byte) error { return validator.Validate(ceType, data) }

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
	if err := validator.Compile(); err != nil {
		t.Fatal(err)
	}
}

// TestDocuments checks what the validator does not: each document declares
// draft 2020-12, its $id is jsonschema.BaseURL plus its file name, it has a title and a
// description, and it is the schema of at least one CloudEvent type.
func TestDocuments(t *testing.T) {
	names, err := fs.Glob(jsonschema.Documents(), "*.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 5 {
		t.Errorf("embedded documents %v, want 5", names)
	}
	for _, name := range names {
		b, _ := fs.ReadFile(jsonschema.Documents(), name)
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
		if doc.ID != jsonschema.BaseURL+name {
			t.Errorf("%s: $id %q, want %q", name, doc.ID, jsonschema.BaseURL+name)
		}
		if doc.Title == "" || doc.Description == "" {
			t.Errorf("%s: no title or description", name)
		}
		used := false
		for _, typ := range jsonschema.Types() {
			n, _ := jsonschema.FileOf(typ)
			used = used || n == name
		}
		if !used {
			t.Errorf("%s is the schema of no CloudEvent type", name)
		}
	}
}

func TestFor(t *testing.T) {
	for _, typ := range jsonschema.Types() {
		b, ok := jsonschema.For(typ)
		if !ok || !json.Valid(b) {
			t.Errorf("For(%q) = %d bytes, %v", typ, len(b), ok)
		}
		if !strings.HasSuffix(typ, ".request") && !strings.HasSuffix(typ, ".response") && typ != bus.PlanType {
			t.Errorf("type %q is neither a request, a response nor a plan", typ)
		}
	}
	if len(jsonschema.Types()) != 7 {
		t.Errorf("Types() = %v, want a request and a response type for each of 3 hooks, and the plan", jsonschema.Types())
	}
	for _, typ := range []string{"", "dev.universalcontroller.sync", "dev.universalcontroller.other.request"} {
		if _, ok := jsonschema.For(typ); ok {
			t.Errorf("For(%q) found a schema", typ)
		}
	}
	same := func(a, b string) {
		x, _ := jsonschema.For(a)
		y, _ := jsonschema.For(b)
		if !bytes.Equal(x, y) {
			t.Errorf("%s and %s have different schemas", a, b)
		}
	}
	same("dev.universalcontroller.sync.request", "dev.universalcontroller.finalize.request")
	same("dev.universalcontroller.sync.response", "dev.universalcontroller.finalize.response")
}
