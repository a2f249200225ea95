package compact

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"
)

// TestFramer cuts streams of random objects — strings with quotes,
// escapes and brackets, nested lists and objects, between them any
// whitespace — as encoding/json reads them one value after the other,
// however the stream's reads and the caller's buffers cut them.
func TestFramer(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	spaces := []string{"", "\n", " ", "\r\n\t "}
	for i := range 300 {
		var stream bytes.Buffer
		for range r.IntN(8) {
			obj := map[string]any{}
			for range r.IntN(5) {
				obj[randomString(r)] = randomValue(r, 3)
			}
			if r.IntN(10) == 0 { // larger than the reader's first buffer
				obj["big"] = string(bytes.Repeat([]byte(`{"\`), frameBuffer))
			}
			data, err := json.Marshal(obj)
			if r.IntN(3) == 0 {
				data, err = json.MarshalIndent(obj, "", "  ")
			}
			if err != nil {
				t.Fatal(err)
			}
			stream.WriteString(spaces[r.IntN(len(spaces))])
			stream.Write(data)
		}
		stream.WriteString(spaces[r.IntN(len(spaces))])

		var want []json.RawMessage
		d := json.NewDecoder(bytes.NewReader(stream.Bytes()))
		for {
			var m json.RawMessage
			if err := d.Decode(&m); err == io.EOF {
				break
			} else if err != nil {
				t.Fatal(err)
			}
			want = append(want, m)
		}

		var src io.Reader = bytes.NewReader(stream.Bytes())
		switch i % 3 {
		case 1:
			src = iotest.OneByteReader(src)
		case 2:
			src = iotest.HalfReader(src)
		}
		frames := framer{}.NewFrameReader(io.NopCloser(src))
		got := []json.RawMessage{}
		for {
			frame, err := readFrame(frames, 1+r.IntN(2*frameBuffer))
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("stream %d: %v", i, err)
			}
			got = append(got, frame)
		}
		if len(want) == 0 && len(got) == 0 {
			continue
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("stream %d (-encoding/json +framer):\n%s", i, diff)
		}
	}
}

// readFrame reads one frame in buffers of size bytes, as apimachinery's
// streaming decoder does.
func readFrame(frames io.Reader, size int) ([]byte, error) {
	var frame []byte
	buf := make([]byte, size)
	for {
		n, err := frames.Read(buf)
		frame = append(frame, buf[:n]...)
		switch {
		case errors.Is(err, io.ErrShortBuffer):
			continue
		case err != nil:
			return nil, err
		}
		return frame, nil
	}
}

// TestFramerBadStreams: a stream that ends within an object, or holds
// something else than objects, fails the read that reaches it, after the
// objects before it.
func TestFramerBadStreams(t *testing.T) {
	for _, tc := range []struct {
		stream string
		want   error
	}{
		{`{"a":1} {"b":[1,`, io.ErrUnexpectedEOF},
		{`{"a":"}`, io.ErrUnexpectedEOF},
		{`{"a":1} 3`, errNotObject},
		{`{"a":1} ["b"]`, errNotObject},
		{`{"a":1} null`, errNotObject},
	} {
		frames := framer{}.NewFrameReader(io.NopCloser(bytes.NewReader([]byte(tc.stream))))
		var err error
		for err == nil {
			_, err = readFrame(frames, 64)
		}
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.stream, err, tc.want)
		}
	}
}
