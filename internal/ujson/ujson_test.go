package ujson

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"
)

// TestAsJSONMarshal holds Marshal to json.Marshal, byte for byte, on
// random unstructured content: strings of control characters, HTML,
// invalid UTF-8 and line separators, floats of every magnitude, int64s at
// their limits, nil and empty maps and lists, and values of other types.
func TestAsJSONMarshal(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 5000 {
		v := randomValue(r, 4)
		want, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Marshal(v)
		if err != nil {
			t.Fatalf("%#v: %v", v, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%#v:\n got %s\nwant %s", v, got, want)
		}
		var w bytes.Buffer
		if n, err := Size(v); err != nil || n != len(want) {
			t.Fatalf("%#v: Size %d (%v), want %d", v, n, err, len(want))
		}
		if err := Write(&w, v); err != nil || !bytes.Equal(w.Bytes(), want) {
			t.Fatalf("%#v: Write wrote %s (%v), want %s", v, w.Bytes(), err, want)
		}
	}
}

// TestFixed: values whose encoding json.Marshal has rules for.
func TestFixed(t *testing.T) {
	for _, v := range []any{
		"", "a\"b\\c", "<&>", "\b\f\n\r\t\x00\x1f\x7f", "\u2028\u2029", "\xff\xfe", "é\xc3", "日本",
		0.0, math.Copysign(0, -1), 1e-7, 1e-6, 1e20, 1e21, 123456789.125, -1e-300, math.MaxFloat64, math.SmallestNonzeroFloat64,
		int64(math.MinInt64), int64(math.MaxInt64), true, false, nil,
		map[string]any(nil), map[string]any{}, []any(nil), []any{},
		map[string]any{"b": 1.5, "a": []any{nil, "x"}, "": map[string]any{}, "é": true, "A": int64(2)},
		json.RawMessage(`{"b": 1, "a":"<"}`), 7, int32(-3), float32(0.1), map[string]string{"z": "y", "a": "b"}, []string{"x"},
	} {
		want, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Append([]byte("prefix"), v)
		if err != nil || !bytes.Equal(got, append([]byte("prefix"), want...)) {
			t.Errorf("%#v: got %s (%v), want prefix%s", v, got, err, want)
		}
	}
	type point struct {
		Y any    `json:"y"`
		X string `json:"x"`
	}
	p := point{map[string]any{"b": int64(1), "a": "<"}, "é"}
	want, _ := json.Marshal(p)
	if got, err := Marshal(Fields{{"y", p.Y}, {"x", p.X}}); err != nil || !bytes.Equal(got, want) {
		t.Errorf("fields: got %s (%v), want %s as json.Marshal writes the struct", got, err, want)
	}
	for _, bad := range []any{math.NaN(), math.Inf(1), map[string]any{"a": []any{math.Inf(-1)}}, map[string]any{"f": func() {}}} {
		if _, err := Marshal(bad); err == nil {
			t.Errorf("%#v encoded, want an error as json.Marshal gives", bad)
		}
	}
}

func randomString(r *rand.Rand) string {
	pieces := []string{"a", "Z", "0", " ", "\"", "\\", "/", "<", ">", "&", "\n", "\t", "\x01", "\x1f", "\x7f", "é", "\u2028", "\u2029", "\xff", "\xe2\x80", "日", "😀", "\b", "\f"}
	var b []byte
	for range r.IntN(10) {
		b = append(b, pieces[r.IntN(len(pieces))]...)
	}
	return string(b)
}

func randomValue(r *rand.Rand, depth int) any {
	switch n := r.IntN(12); {
	case n == 0 && depth > 0:
		if r.IntN(8) == 0 {
			return map[string]any(nil)
		}
		m := map[string]any{}
		for range r.IntN(20) {
			m[randomString(r)] = randomValue(r, depth-1)
		}
		return m
	case n == 1 && depth > 0:
		if r.IntN(8) == 0 {
			return []any(nil)
		}
		var l []any = []any{}
		for range r.IntN(5) {
			l = append(l, randomValue(r, depth-1))
		}
		return l
	case n == 2:
		return math.Float64frombits(r.Uint64()&^(0x7ff<<52) | uint64(r.IntN(0x7ff))<<52) // any finite float
	case n == 3:
		return float64(r.IntN(1000)) / 8
	case n == 4:
		return r.IntN(2) == 0
	case n == 5:
		return nil
	case n == 6:
		return int64(r.Uint64())
	case n == 7:
		return map[string]string{randomString(r): randomString(r)}
	}
	return randomString(r)
}
