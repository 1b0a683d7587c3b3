package changeset

import (
	"bufio"
	"io"
)

// lineReader reads a diff line by line, a line longer than maxLine in parts.
type lineReader struct {
	br      *bufio.Reader
	buf     []byte
	peeked  bool
	pWhole  bool
	pErr    error
	midLine bool
}

func newLineReader(r io.Reader) *lineReader {
	return &lineReader{br: bufio.NewReaderSize(r, 64<<10)}
}

// reset makes lr read r from its start, keeping its buffers: one reader
// serves a file after another.
func (lr *lineReader) reset(r io.Reader) {
	lr.br.Reset(r)
	*lr = lineReader{br: lr.br, buf: lr.buf[:0]}
}

// next returns the next line with its newline (whole), or the next part
// of a long one: whole is false for every part but the last.
func (lr *lineReader) next() ([]byte, bool, error) {
	if lr.peeked {
		lr.peeked = false
		return lr.buf, lr.pWhole, lr.pErr
	}
	lr.buf = lr.buf[:0]
	for {
		frag, err := lr.br.ReadSlice('\n')
		lr.buf = append(lr.buf, frag...)
		switch {
		case err == bufio.ErrBufferFull:
			if len(lr.buf) >= maxLine {
				lr.midLine = true
				return lr.buf, false, nil
			}
			continue
		case err == io.EOF && len(lr.buf) == 0:
			return nil, false, io.EOF
		case err != nil && err != io.EOF:
			return nil, false, err
		}
		lr.midLine = false
		return lr.buf, true, nil
	}
}

// peek returns the next line without consuming it.
func (lr *lineReader) peek() ([]byte, error) {
	if !lr.peeked {
		lr.buf, lr.pWhole, lr.pErr = lr.next()
		lr.peeked = true
	}
	return lr.buf, lr.pErr
}

// skipRest skips the rest of a long line.
func (lr *lineReader) skipRest() {
	for lr.midLine {
		if _, _, err := lr.next(); err != nil {
			return
		}
	}
}
