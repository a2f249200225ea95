package compact

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Encoded returns the object to be encoded, at a fraction of Unstructured's
// cost: its type and metadata as Unstructured has them, and every other
// top-level field (spec, status, data…) as its JSON, a json.RawMessage that
// shares the cache's bytes and that json.Marshal writes as it is. It is
// what a hook request carries: nothing may read, change or deep-copy a
// field of it but apiVersion, kind and metadata (runtime's deep copy
// panics on a json.RawMessage).
func (o *Object) Encoded() (*unstructured.Unstructured, error) {
	var obj map[string]any
	if o.rest == nil {
		obj = make(map[string]any, 3)
	} else {
		fs, err := splitObject(o.rest)
		if err != nil {
			return nil, fmt.Errorf("split %s %s: %w", o.Kind, o.key(), err)
		}
		obj = make(map[string]any, len(fs)+3)
		for _, f := range fs {
			obj[f.name] = json.RawMessage(f.value)
		}
	}
	return o.withType(obj), nil
}

// DecodeEncoded is Decode for objects to be encoded (see Object.Encoded):
// an Object, a tombstone of one, or an unstructured object, which is
// returned as it is.
func DecodeEncoded(obj any) (*unstructured.Unstructured, error) {
	if o, ok := unwrap(obj).(*Object); ok {
		return o.Encoded()
	}
	return Decode(obj)
}

// field is one top-level field of a JSON object, its value undecoded.
type field struct {
	name  string
	value []byte
}

var errSyntax = errors.New("not a JSON object")

// splitObject returns the top-level fields of a JSON object, their values
// slices of data. data is JSON an apiserver or encoding/json wrote (the
// Object's rest): the split finds where each value ends, it does not
// validate it.
func splitObject(data []byte) (fields, error) {
	return appendSplit(nil, data)
}

// appendSplit is splitObject, appending the fields to fs.
func appendSplit(fs fields, data []byte) (fields, error) {
	i := skipSpace(data, 0)
	if i == len(data) || data[i] != '{' {
		return nil, errSyntax
	}
	for i = skipSpace(data, i+1); i < len(data) && data[i] != '}'; {
		nameEnd, err := stringEnd(data, i)
		if err != nil {
			return nil, err
		}
		name, err := unquote(data[i:nameEnd])
		if err != nil {
			return nil, err
		}
		i = skipSpace(data, nameEnd)
		if i == len(data) || data[i] != ':' {
			return nil, errSyntax
		}
		start := skipSpace(data, i+1)
		end, err := valueEnd(data, start)
		if err != nil {
			return nil, err
		}
		fs = append(fs, field{name, data[start:end]})
		if i, err = next(data, end, '}'); err != nil {
			return nil, err
		}
	}
	if i == len(data) {
		return nil, errSyntax
	}
	return fs, nil
}

// splitArray returns the values of a JSON array, slices of data; none for
// null.
func splitArray(data []byte) ([][]byte, error) {
	i := skipSpace(data, 0)
	if string(data[i:]) == "null" {
		return nil, nil
	}
	if i == len(data) || data[i] != '[' {
		return nil, errSyntax
	}
	var values [][]byte
	for i = skipSpace(data, i+1); i < len(data) && data[i] != ']'; {
		end, err := valueEnd(data, i)
		if err != nil {
			return nil, err
		}
		values = append(values, data[i:end])
		if i, err = next(data, end, ']'); err != nil {
			return nil, err
		}
	}
	if i == len(data) {
		return nil, errSyntax
	}
	return values, nil
}

// next returns where the member after a value that ends at data[i] starts,
// past its comma, or the closing bracket's index.
func next(data []byte, i int, closing byte) (int, error) {
	i = skipSpace(data, i)
	switch {
	case i < len(data) && data[i] == ',':
		i = skipSpace(data, i+1)
		if i < len(data) && data[i] == closing {
			return 0, errSyntax // a comma before the end
		}
		return i, nil
	case i < len(data) && data[i] == closing:
		return i, nil
	}
	return 0, errSyntax
}

func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// stringEnd returns where the JSON string that starts at data[i] ends (the
// index after its closing quote).
func stringEnd(data []byte, i int) (int, error) {
	if i == len(data) || data[i] != '"' {
		return 0, errSyntax
	}
	for i++; i < len(data); i++ {
		switch data[i] {
		case '\\':
			i++ // the escaped character, whatever it is
		case '"':
			return i + 1, nil
		}
	}
	return 0, errSyntax
}

// valueEnd returns where the JSON value that starts at data[i] ends.
func valueEnd(data []byte, i int) (int, error) {
	if i == len(data) {
		return 0, errSyntax
	}
	switch data[i] {
	case '"':
		return stringEnd(data, i)
	case '{', '[':
		depth := 0
		for i < len(data) {
			switch data[i] {
			case '"':
				end, err := stringEnd(data, i)
				if err != nil {
					return 0, err
				}
				i = end
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1, nil
				}
			}
			i++
		}
		return 0, errSyntax
	}
	// A number, true, false or null: up to the next delimiter.
	start := i
	for i < len(data) && strings.IndexByte(",}] \t\n\r", data[i]) < 0 {
		i++
	}
	if i == start {
		return 0, errSyntax
	}
	return i, nil
}

// unquote decodes a JSON string: without escapes, its bytes.
func unquote(quoted []byte) (string, error) {
	if bytes.IndexByte(quoted, '\\') < 0 {
		return string(quoted[1 : len(quoted)-1]), nil
	}
	var s string
	if err := json.Unmarshal(quoted, &s); err != nil {
		return "", err
	}
	return s, nil
}
