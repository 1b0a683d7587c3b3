package changeset

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"errors"
	"io"
	"strings"

	"github.com/paddock-dev/paddock/redact"
)

// binaryClean decodes the hunks of a binary patch (read from lr, after its
// "GIT binary patch" line) and reports whether the content they encode
// holds no declared secret of red. A patch that cannot be decoded is not
// clean.
func binaryClean(red *redact.Redactor, lr *lineReader) bool {
	clean := true
	for {
		line, err := lr.peek()
		if err != nil {
			return clean
		}
		kind, _, ok := strings.Cut(strings.TrimRight(string(line), "\n"), " ")
		if !ok || (kind != "literal" && kind != "delta") {
			return clean // the end of the patch
		}
		lr.next()
		h := &hunkReader{lr: lr}
		d := red.NewDetector()
		if err := scanHunk(kind == "delta", h, d); err != nil || d.Found() {
			clean = false
		}
		if err := h.drain(); err != nil {
			clean = false
		}
	}
}

// scanHunk inflates one hunk of a binary patch into d: a literal's bytes
// as they are, a delta's inserted bytes (what it copies from the old
// content breaks the stream: no secret is pieced together across it).
func scanHunk(delta bool, h io.Reader, d *redact.Detector) error {
	z, err := zlib.NewReader(h)
	if err != nil {
		return err
	}
	defer z.Close()
	if !delta {
		_, err := io.Copy(d, z)
		return err
	}
	r := bufio.NewReader(z)
	for range 2 { // the sizes of the old and the new content
		if _, err := readVarint(r); err != nil {
			return err
		}
	}
	for {
		op, err := r.ReadByte()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		switch {
		case op&0x80 != 0: // copy from the old content: offset and size bytes follow
			for bit := byte(1); bit < 0x80; bit <<= 1 {
				if op&bit != 0 {
					if _, err := r.ReadByte(); err != nil {
						return err
					}
				}
			}
			d.Break()
		case op != 0: // insert the next op bytes
			if _, err := io.CopyN(d, r, int64(op)); err != nil {
				return err
			}
		default:
			return errors.New("changeset: a delta opcode 0")
		}
	}
}

func readVarint(r io.ByteReader) (uint64, error) {
	var v uint64
	for shift := 0; shift < 64; shift += 7 {
		b, err := r.ReadByte()
		if err != nil {
			return 0, err
		}
		v |= uint64(b&0x7f) << shift
		if b&0x80 == 0 {
			return v, nil
		}
	}
	return 0, errors.New("changeset: a varint too long")
}

// hunkReader reads the bytes one hunk of a binary patch encodes: its lines
// of base85, each opened by a letter giving its length, up to a blank line.
type hunkReader struct {
	lr      *lineReader
	pending []byte
	done    bool
}

const base85 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz!#$%&()*+-;<=>?@^_`{|}~"

var base85Value = func() (v [256]int) {
	for i := range v {
		v[i] = -1
	}
	for i := 0; i < len(base85); i++ {
		v[base85[i]] = i
	}
	return v
}()

func (h *hunkReader) Read(p []byte) (int, error) {
	for len(h.pending) == 0 {
		if h.done {
			return 0, io.EOF
		}
		line, whole, err := h.lr.next()
		if err != nil {
			return 0, io.ErrUnexpectedEOF
		}
		if !whole {
			return 0, errors.New("changeset: a binary patch line too long")
		}
		line = bytes.TrimRight(line, "\n")
		if len(line) == 0 {
			h.done = true
			return 0, io.EOF
		}
		if h.pending, err = decodeBase85Line(line); err != nil {
			return 0, err
		}
	}
	n := copy(p, h.pending)
	h.pending = h.pending[n:]
	return n, nil
}

// drain reads the rest of the hunk, up to its blank line.
func (h *hunkReader) drain() error {
	var buf [512]byte
	for {
		h.pending = nil
		if _, err := h.Read(buf[:]); err == io.EOF {
			return nil
		} else if err != nil {
			return err
		}
	}
}

func decodeBase85Line(line []byte) ([]byte, error) {
	var n int
	switch c := line[0]; {
	case c >= 'A' && c <= 'Z':
		n = int(c-'A') + 1
	case c >= 'a' && c <= 'z':
		n = int(c-'a') + 27
	default:
		return nil, errors.New("changeset: a bad binary patch line")
	}
	enc := line[1:]
	if len(enc) != (n+3)/4*5 {
		return nil, errors.New("changeset: a bad binary patch line")
	}
	out := make([]byte, 0, len(enc)/5*4)
	for i := 0; i < len(enc); i += 5 {
		var acc uint64
		for _, c := range enc[i : i+5] {
			v := base85Value[c]
			if v < 0 {
				return nil, errors.New("changeset: a bad binary patch line")
			}
			acc = acc*85 + uint64(v)
		}
		if acc > 0xffffffff {
			return nil, errors.New("changeset: a bad binary patch line")
		}
		out = append(out, byte(acc>>24), byte(acc>>16), byte(acc>>8), byte(acc))
	}
	return out[:n], nil
}
