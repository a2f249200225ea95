package ujson

import (
	"strconv"
	"unicode/utf8"

	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// Decoding. k8s.io's decoder (utiljson.Unmarshal, sigs.k8s.io/json's
// case-sensitive, int-preserving copy of encoding/json) reads a document
// twice, once to check it and once to decode it through reflection. Decode
// reads it once, into the same values: objects as map[string]any, arrays
// as []any (empty, not nil, when empty), numbers written without a
// fraction or an exponent as int64 where they fit, other numbers as
// float64, strings, booleans and nil.
//
// It decodes the common document alone, and leaves the rest to utiljson,
// so that the value and the error are always utiljson's: a document that
// is not valid JSON, a key given twice in an object (utiljson keeps the
// last; a strict reader reports it), a number out of float64's range,
// nesting deeper than encoding/json allows, and a string with escapes or
// invalid UTF-8 all go the slow way — the last one for that string only.

// maxDepth is encoding/json's limit on nesting.
const maxDepth = 10000

// Decode returns the value of the JSON document data, as utiljson.Unmarshal
// decodes it into an any.
func Decode(data []byte) (any, error) {
	if v, ok := TryDecode(data); ok {
		return v, nil
	}
	var v any
	err := utiljson.Unmarshal(data, &v)
	return v, err
}

// DecodeObject returns the JSON object data as a map, as utiljson.Unmarshal
// decodes it into a nil map[string]any (nil for null).
func DecodeObject(data []byte) (map[string]any, error) {
	if v, ok := TryDecode(data); ok {
		if m, ok := v.(map[string]any); ok {
			return m, nil
		}
	}
	var m map[string]any
	err := utiljson.Unmarshal(data, &m)
	return m, err
}

// TryDecode is Decode without the slow way: ok is false for a document it
// leaves to utiljson (see above), which the caller then decodes, and
// judges, as it would have.
func TryDecode(data []byte) (v any, ok bool) {
	d := decoder{data: data}
	if v, ok = d.value(0); ok {
		d.skipSpace()
		ok = d.i == len(d.data)
	}
	if !ok {
		return nil, false
	}
	return v, true
}

// decoder reads one document; i is the next byte to read.
type decoder struct {
	data []byte
	i    int
}

func (d *decoder) skipSpace() {
	for d.i < len(d.data) {
		switch d.data[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// value reads the value at d.i, depth being the arrays and objects around.
func (d *decoder) value(depth int) (any, bool) {
	d.skipSpace()
	if d.i >= len(d.data) {
		return nil, false
	}
	switch c := d.data[d.i]; {
	case c == '{':
		return d.object(depth + 1)
	case c == '[':
		return d.array(depth + 1)
	case c == '"':
		s, ok := d.string()
		return s, ok
	case c == '-' || c >= '0' && c <= '9':
		return d.number()
	case c == 't':
		return true, d.literal("true")
	case c == 'f':
		return false, d.literal("false")
	case c == 'n':
		return nil, d.literal("null")
	}
	return nil, false
}

func (d *decoder) literal(word string) bool {
	if len(d.data)-d.i < len(word) || string(d.data[d.i:d.i+len(word)]) != word {
		return false
	}
	d.i += len(word)
	return true
}

// object reads an object; false on a key given twice.
func (d *decoder) object(depth int) (any, bool) {
	if depth > maxDepth {
		return nil, false
	}
	m := map[string]any{}
	for more := !d.empty('}'); more; {
		d.skipSpace()
		if d.i >= len(d.data) || d.data[d.i] != '"' {
			return nil, false
		}
		k, ok := d.string()
		if !ok {
			return nil, false
		}
		d.skipSpace()
		if d.i >= len(d.data) || d.data[d.i] != ':' {
			return nil, false
		}
		d.i++
		v, ok := d.value(depth)
		if !ok {
			return nil, false
		}
		n := len(m)
		if m[k] = v; len(m) == n {
			return nil, false // k twice
		}
		if more, ok = d.more('}'); !ok {
			return nil, false
		}
	}
	return m, true
}

func (d *decoder) array(depth int) (any, bool) {
	if depth > maxDepth {
		return nil, false
	}
	l := make([]any, 0)
	for more := !d.empty(']'); more; {
		v, ok := d.value(depth)
		if !ok {
			return nil, false
		}
		l = append(l, v)
		if more, ok = d.more(']'); !ok {
			return nil, false
		}
	}
	return l, true
}

// empty reads the opening bracket at d.i, and its closing one if nothing
// is between them.
func (d *decoder) empty(closing byte) bool {
	d.i++
	d.skipSpace()
	if d.i < len(d.data) && d.data[d.i] == closing {
		d.i++
		return true
	}
	return false
}

// more reads what follows a member of an object or an array: a comma
// (more) or the closing bracket (no more); false for anything else.
func (d *decoder) more(closing byte) (more, ok bool) {
	d.skipSpace()
	if d.i < len(d.data) {
		switch d.data[d.i] {
		case ',':
			d.i++
			return true, true
		case closing:
			d.i++
			return false, true
		}
	}
	return false, false
}

// string reads a string. One with an escape, or with bytes that are not
// UTF-8, is decoded by utiljson.
func (d *decoder) string() (string, bool) {
	start := d.i + 1 // after the quote
	plain := true
	for i := start; i < len(d.data); i++ {
		switch c := d.data[i]; {
		case c == '"':
			d.i = i + 1
			s := d.data[start:i]
			if plain && utf8.Valid(s) {
				return string(s), true
			}
			var out string
			if err := utiljson.Unmarshal(d.data[start-1:i+1], &out); err != nil {
				return "", false
			}
			return out, true
		case c == '\\':
			plain = false
			i++ // the escaped byte: a quote does not end the string
		case c < ' ':
			return "", false
		}
	}
	return "", false
}

// number reads a number as utiljson does: an int64 if it has no fraction
// and no exponent and fits, else a float64 (false if out of its range).
func (d *decoder) number() (any, bool) {
	start := d.i
	if d.data[d.i] == '-' {
		d.i++
	}
	whole := true
	switch {
	case d.i < len(d.data) && d.data[d.i] == '0':
		d.i++
	case d.digits() == 0:
		return nil, false
	}
	if d.i < len(d.data) && d.data[d.i] == '.' {
		d.i++
		whole = false
		if d.digits() == 0 {
			return nil, false
		}
	}
	if d.i < len(d.data) && (d.data[d.i] == 'e' || d.data[d.i] == 'E') {
		d.i++
		if d.i < len(d.data) && (d.data[d.i] == '+' || d.data[d.i] == '-') {
			d.i++
		}
		if d.digits() == 0 {
			return nil, false
		}
	}
	s := string(d.data[start:d.i])
	if whole {
		// utiljson tries an int64 for any number without a '.', an
		// exponent's included ("1e3" fails to parse as one).
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return n, true
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	return f, err == nil
}

// digits skips decimal digits and counts them.
func (d *decoder) digits() int {
	n := 0
	for d.i < len(d.data) && d.data[d.i] >= '0' && d.data[d.i] <= '9' {
		d.i++
		n++
	}
	return n
}
