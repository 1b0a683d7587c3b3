package redact

import (
	"bytes"
	"io"
)

// Writer masks secrets in a stream: a secret split across two writes is
// still masked. It holds back what could be the start of a secret whose end
// has not arrived yet — a proper prefix of a declared secret's form, the
// unfinished last line (credential shapes hold no newline), an unfinished
// private key block — and emits it on a later write or on Close. What is held
// back is bounded by MaxHold.
type Writer struct {
	r       *Redactor
	w       io.Writer
	pending []byte
	masked  bool
}

// NewWriter returns a Writer that masks r's secrets in what it passes to w.
func (r *Redactor) NewWriter(w io.Writer) *Writer { return &Writer{r: r, w: w} }

// Write masks and passes on as much of p as is safe.
func (s *Writer) Write(p []byte) (int, error) {
	s.pending = append(s.pending, p...)
	cut := s.safeCut()
	if cut > 0 {
		if _, err := s.w.Write(s.mask(s.pending[:cut])); err != nil {
			return 0, err
		}
		s.pending = append(s.pending[:0], s.pending[cut:]...)
	}
	return len(p), nil
}

// Flush passes on what is held back but what could be the start of a
// declared secret (or of a whole one it would split) and an unfinished
// private key block: for output someone watches as it comes (a terminal's
// prompt has no newline), when no more has come for a moment. A credential
// shape split across a Flush is not masked whole.
func (s *Writer) Flush() error {
	cut := s.cut(false)
	if cut == 0 {
		return nil
	}
	if _, err := s.w.Write(s.mask(s.pending[:cut])); err != nil {
		return err
	}
	s.pending = append(s.pending[:0], s.pending[cut:]...)
	return nil
}

// Held reports whether the Writer holds anything back.
func (s *Writer) Held() bool { return len(s.pending) > 0 }

// Close passes on what is held back: masked, and with the start of a
// declared secret it ends with masked too (MaskTail).
func (s *Writer) Close() error {
	if len(s.pending) == 0 {
		return nil
	}
	m := s.mask(s.pending)
	if t := s.r.MaskTail(m); len(t) != len(m) || !bytes.Equal(t, m) {
		m, s.masked = t, true
	}
	_, err := s.w.Write(m)
	s.pending = s.pending[:0]
	return err
}

func (s *Writer) mask(b []byte) []byte {
	m := s.r.Bytes(b)
	if !bytes.Equal(m, b) {
		s.masked = true
	}
	return m
}

// Masked reports whether anything passed on so far was masked.
func (s *Writer) Masked() bool { return s.masked }

// MaxHold bounds what a Writer holds back; a line or key block longer than
// that is emitted, masked as far as it goes.
const MaxHold = 64 << 10

// safeCut returns how much of pending can be masked and emitted: up to the
// earliest position where a secret might begin but not yet end, moved back
// to the start of any whole secret that position would split.
func (s *Writer) safeCut() int { return s.cut(true) }

// cut is safeCut, holding back the unfinished last line or not.
func (s *Writer) cut(lines bool) int {
	cut := len(s.pending)
	// The unfinished last line, and an unfinished private key block.
	if i := bytes.LastIndexByte(s.pending, '\n'); lines && len(s.pending)-(i+1) < MaxHold {
		cut = i + 1
	}

	var pairs []pair
	if s.r != nil {
		pairs = s.r.pairs
	}
	for _, p := range pairs {
		f := p.find
		// A proper prefix of f at the end of pending.
		for k := min(len(f)-1, len(s.pending)); k > 0; k-- {
			if bytes.HasSuffix(s.pending, f[:k]) {
				cut = min(cut, len(s.pending)-k)
				break
			}
		}
	}
	// Do not split a private key block: keep it whole from its BEGIN line.
	if i := bytes.LastIndex(s.pending[:cut], []byte("-----BEGIN ")); i >= 0 &&
		!privateKeyBlock.Match(s.pending[i:cut]) && cut-i < MaxHold {
		cut = i
	}
	// Do not split a whole occurrence that straddles the cut.
	for moved := true; moved; {
		moved = false
		for _, p := range pairs {
			f := p.find
			from := max(0, cut-len(f)+1)
			if i := bytes.Index(s.pending[from:], f); i >= 0 && from+i < cut && from+i+len(f) > cut {
				cut, moved = from+i, true
			}
		}
	}
	return cut
}
