package docs

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"universalcontroller.dev/uc/internal/schemacheck"
	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/jsonschema"
)

// checkedBlock is the marker before a JSON block of the hook contract:
// "<!-- checked as a HOOK.request|response [FILE] (…) -->". FILE is the
// recorded message the block shows.
var checkedBlock = regexp.MustCompile(`^<!-- checked as a (\w+)\.(request|response)(?: (\S+\.json))? \(test/docs/contract_test\.go\) -->$`)

// TestHookContract: every JSON block of docs/hook-contract.md is a message
// of the hook contract as uc sends or takes it. Each is marked with what
// it is; it must parse, validate against that message's JSON Schema (the
// decorators' messages have none), and, when it names the recorded
// message it shows (a golden file of the watcher's tests), be that
// message, reformatted.
func TestHookContract(t *testing.T) {
	const page = "../../docs/hook-contract.md"
	data, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	validator := schemacheck.New(jsonschema.Documents(), jsonschema.BaseURL, jsonschema.FileOf)
	lines := strings.Split(string(data), "\n")
	var checked int
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != "```json" {
			continue
		}
		start := i + 1
		end := start
		for end < len(lines) && strings.TrimSpace(lines[end]) != "```" {
			end++
		}
		block := []byte(strings.Join(lines[start:end], "\n"))
		m := checkedBlock.FindStringSubmatch(strings.TrimSpace(lines[max(i-1, 0)]))
		i = end
		if m == nil {
			t.Errorf("%s:%d: a JSON block without its marker <!-- checked as a HOOK.request|response [FILE] (test/docs/contract_test.go) -->", page, start)
			continue
		}
		checked++
		hook, kind, golden := m[1], m[2], m[3]
		var got any
		if err := json.Unmarshal(block, &got); err != nil {
			t.Errorf("%s:%d: not JSON: %v", page, start, err)
			continue
		}
		ceType := bus.RequestType(hook)
		if kind == "response" {
			ceType = bus.ResponseType(hook)
		}
		if _, ok := jsonschema.FileOf(ceType); ok {
			if err := validator.Validate(ceType, block); err != nil {
				t.Errorf("%s:%d: not a valid %s: %v", page, start, ceType, err)
			}
		} else if hook != "decorator" {
			t.Errorf("%s:%d: no JSON Schema for %s", page, start, ceType)
		}
		if golden == "" {
			continue
		}
		recorded, err := os.ReadFile(filepath.Join("../..", golden))
		if err != nil {
			t.Errorf("%s:%d: %v", page, start, err)
			continue
		}
		var want any
		if err := json.Unmarshal(bytes.TrimSpace(recorded), &want); err != nil {
			t.Errorf("%s: %v", golden, err)
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:%d: not the message of %s (regenerate the block from it)", page, start, golden)
		}
	}
	if checked < 8 {
		t.Fatalf("checked %d JSON blocks of %s; want every one", checked, page)
	}
}
