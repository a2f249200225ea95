package compact

import (
	"errors"
	"fmt"
	"io"
)

// framer cuts a watch stream, JSON objects one after the other, into one
// object per frame, as apimachinery's JSON framer does: that one reads
// each event through a json.Decoder, which scans every byte twice (to find
// the value's end, then to decode it into a json.RawMessage) and copies
// it. This one scans each byte once, to find where the object ends, and
// copies it only into the caller's buffer; the decoding that follows
// checks what it reads.
type framer struct{}

func (framer) NewFrameReader(r io.ReadCloser) io.ReadCloser {
	return &frameReader{r: r, buf: make([]byte, frameBuffer)}
}

// NewFrameWriter writes frames as they are: a JSON object ends itself.
func (framer) NewFrameWriter(w io.Writer) io.Writer { return w }

// frameBuffer is what a frame reader reads at once, and the size of its
// buffer until an object does not fit.
const frameBuffer = 8 << 10

var errNotObject = errors.New("a watch stream holds JSON objects")

// frameReader reads one JSON object per Read. A caller's buffer too small
// for it gets its first bytes and io.ErrShortBuffer, then the rest on the
// next Reads, as io.Reader's contract for framers (runtime.Framer) asks.
type frameReader struct {
	r   io.ReadCloser
	err error // of the last read of r, returned once its bytes are framed

	// buf[:n] is what was read of r; the object being scanned starts at
	// start, and is scanned up to pos.
	buf              []byte
	n, start, pos    int
	depth            int
	inString, escape bool

	// rest is what the caller's last buffer could not hold of a frame.
	rest []byte
}

func (f *frameReader) Read(p []byte) (int, error) {
	frame := f.rest
	if len(frame) == 0 {
		var err error
		if frame, err = f.next(); err != nil {
			return 0, err
		}
	}
	n := copy(p, frame)
	if f.rest = frame[n:]; len(f.rest) > 0 {
		return n, io.ErrShortBuffer
	}
	return n, nil
}

func (f *frameReader) Close() error { return f.r.Close() }

// next returns the next object of the stream: a slice of buf, valid until
// the next call.
func (f *frameReader) next() ([]byte, error) {
	for {
		if frame, err := f.scan(); frame != nil || err != nil {
			return frame, err
		}
		if f.err != nil {
			if f.err == io.EOF && f.depth > 0 {
				return nil, fmt.Errorf("the watch stream ended within an object: %w", io.ErrUnexpectedEOF)
			}
			return nil, f.err
		}
		f.fill()
	}
}

// scan reads buf from pos on, to the end of the object that starts at
// start: that object, or nil when it goes on past what was read.
func (f *frameReader) scan() ([]byte, error) {
	for ; f.pos < f.n; f.pos++ {
		c := f.buf[f.pos]
		switch {
		case f.inString:
			switch {
			case f.escape:
				f.escape = false
			case c == '\\':
				f.escape = true
			case c == '"':
				f.inString = false
			}
		case f.depth == 0: // between objects
			switch c {
			case ' ', '\t', '\n', '\r':
				f.start = f.pos + 1
			case '{':
				f.start, f.depth = f.pos, 1
			default:
				return nil, fmt.Errorf("%w, not %q", errNotObject, c)
			}
		case c == '"':
			f.inString = true
		case c == '{' || c == '[':
			f.depth++
		case c == '}' || c == ']':
			if f.depth--; f.depth == 0 {
				frame := f.buf[f.start : f.pos+1]
				f.pos++
				f.start = f.pos
				return frame, nil
			}
		}
	}
	return nil, nil
}

// fill reads more of the stream, after the object being scanned, moved to
// the start of buf, which grows if the object fills it.
func (f *frameReader) fill() {
	if f.start > 0 {
		f.n = copy(f.buf, f.buf[f.start:f.n])
		f.pos -= f.start
		f.start = 0
	}
	if f.n == len(f.buf) {
		f.buf = append(f.buf, make([]byte, len(f.buf))...)
	}
	var read int
	read, f.err = f.r.Read(f.buf[f.n:])
	f.n += read
}
