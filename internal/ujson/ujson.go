// Package ujson encodes the content of unstructured objects — maps of
// strings to values, lists, strings, int64s, float64s, booleans and nulls —
// as JSON, byte for byte as json.Marshal does (keys sorted, HTML and line
// separators escaped), without its reflection: json.Marshal allocates for
// every map it encodes (an iterator and a sorted copy of its keys), which
// made most of the cost of encoding uc's requests and hashing its desired
// objects. A value of any other type is encoded by json.Marshal. It decodes
// JSON into such content as k8s.io's decoder does, in one pass (decode.go).
package ujson

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"sync"
	"unicode/utf8"
)

// Marshal returns the JSON of v, as json.Marshal does.
func Marshal(v any) ([]byte, error) {
	var out []byte
	err := encode(v, func(data []byte) {
		out = append(make([]byte, 0, len(data)), data...)
	})
	return out, err
}

// Write writes the JSON of v to w (a hash, say), as json.Marshal writes it.
func Write(w io.Writer, v any) error {
	var err error
	if e := encode(v, func(data []byte) { _, err = w.Write(data) }); e != nil {
		return e
	}
	return err
}

// Size is the length of the JSON of v.
func Size(v any) (int, error) {
	var n int
	err := encode(v, func(data []byte) { n = len(data) })
	return n, err
}

// buffers are the buffers values are encoded into before they are
// copied or written: a buffer grows to the size of what it encodes once.
var buffers = sync.Pool{New: func() any { return new([]byte) }}

// encode encodes v into a buffer of buffers and hands its JSON to use,
// which must not keep it.
func encode(v any, use func([]byte)) error {
	buf := buffers.Get().(*[]byte)
	defer buffers.Put(buf)
	data, err := Append((*buf)[:0], v)
	*buf = data
	if err != nil {
		return err
	}
	use(data)
	return nil
}

// Append appends the JSON of v to b, as json.Marshal writes it.
func Append(b []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case string:
		return appendString(b, v), nil
	case bool:
		return strconv.AppendBool(b, v), nil
	case int64:
		return strconv.AppendInt(b, v, 10), nil
	case float64:
		return appendFloat(b, v)
	case map[string]any:
		return appendMap(b, v)
	case []any:
		return appendList(b, v)
	case Fields:
		return appendFields(b, v)
	}
	data, err := json.Marshal(v)
	if err != nil {
		return b, err
	}
	return append(b, data...), nil
}

func appendMap(b []byte, m map[string]any) ([]byte, error) {
	if m == nil {
		return append(b, "null"...), nil
	}
	var array [16]string
	keys := array[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, k)
		b = append(b, ':')
		var err error
		if b, err = Append(b, m[k]); err != nil {
			return b, err
		}
	}
	return append(b, '}'), nil
}

// Fields is a JSON object whose fields are written in their order, as
// json.Marshal writes a struct's.
type Fields []Field

// Field is one field of Fields.
type Field struct {
	Name  string
	Value any
}

func appendFields(b []byte, fields Fields) ([]byte, error) {
	b = append(b, '{')
	for i, f := range fields {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, f.Name)
		b = append(b, ':')
		var err error
		if b, err = Append(b, f.Value); err != nil {
			return b, err
		}
	}
	return append(b, '}'), nil
}

func appendList(b []byte, l []any) ([]byte, error) {
	if l == nil {
		return append(b, "null"...), nil
	}
	b = append(b, '[')
	for i, v := range l {
		if i > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = Append(b, v); err != nil {
			return b, err
		}
	}
	return append(b, ']'), nil
}

// appendFloat writes a float64 as encoding/json does: like ES6, in
// exponent form below 1e-6 and from 1e21, with a one-digit exponent kept
// short.
func appendFloat(b []byte, f float64) ([]byte, error) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return b, fmt.Errorf("json: unsupported value: %s", strconv.FormatFloat(f, 'g', -1, 64))
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// e-09 to e-9
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, nil
}

const hex = "0123456789abcdef"

// appendString writes a JSON string as encoding/json does with HTML
// escaping: <, > and & as \u003c, \u003e and \u0026, control characters
// short where JSON has a short form, invalid UTF-8 as U+FFFD, and U+2028
// and U+2029 escaped.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if safe(c) {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// safe tells whether an ASCII byte is written as it is in a JSON string
// with HTML escaping.
func safe(c byte) bool {
	return c >= ' ' && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
}
