package changeset

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/paddock-dev/paddock/changeset/hunks"
	"github.com/paddock-dev/paddock/redact"
	"github.com/paddock-dev/paddock/termsafe"
)

// Finding is what masking a diff saw in one file's part of it.
type Finding struct {
	// Masked: a credential or a declared secret was masked in it, or its
	// binary patch was withheld because its content holds a declared secret.
	Masked bool
	// Control: an added or removed line holds a character a terminal acts
	// on (see package termsafe).
	Control bool
}

// keyMask replaces each line of a private key's body.
const keyMask = "[REDACTED:private_key]"

// keyLineMin is the length from which a line of key data, seen where no
// key marker says a key is open, is taken for a line of a key's body.
const keyLineMin = 40

// maxLine is the longest diff line masked whole; a longer one (minified
// code, a data file) is masked as a stream, as far as redact.Writer goes.
const maxLine = 1 << 20

// MaskDiff copies the unified diff in the file src to dst with every
// credential shape and every declared secret of red masked, and returns
// what it found in each file's part of the diff, by path (masked as red
// masks it).
//
// Masking is per line, within one file's part and one hunk: no mask spans
// a "diff --git" header or a hunk header, so no file of the diff is hidden
// by another. A private key is followed line by line: after a line with
// its BEGIN marker, each line of key data on the same side of the hunk
// (old or new) is replaced with [REDACTED:private_key] until its END line;
// a hunk that starts inside a key (its END comes first) is masked from its
// start. A hunk that shows key data but neither marker (a change in the
// middle of a key) is placed with newContent, which opens a path's new
// content: its key data lines are masked where the new file has a key.
// Lines that are not key data (code between a BEGIN and an END) are shown.
// The diff keeps its lines and hunk counts: git apply takes it, and writes
// the masks where the secrets were.
//
// A binary patch is zlib-compressed base85, which no mask matches: when red
// declares secrets, each one is decoded and scanned, and one whose content
// holds a declared secret (in any form redact knows) is withheld, replaced
// with git's "Binary files ... differ" line. One that cannot be decoded is
// withheld too.
//
// MaskDiff reads src twice (what to withhold is known only at the end of a
// binary patch or a hunk) and holds at most one line in memory.
func MaskDiff(red *redact.Redactor, src string, dst io.Writer, newContent func(path string) (io.ReadCloser, error)) (map[string]*Finding, error) {
	var lr *lineReader // one for every placed file: its 64 KiB buffer is made once
	return maskDiff(red, src, dst, func(path string) []span {
		if newContent == nil {
			return nil
		}
		f, err := newContent(path)
		if err != nil {
			return nil // a file that cannot be read has none
		}
		defer f.Close()
		var spans []span
		spans, lr = keySpansOf(f, lr)
		return spans
	})
}

// maskDiff is MaskDiff given keySpans, the lines of a path's new content
// that lie inside a private key (see keySpansOf), asked for each placed
// file in the diff's order.
func maskDiff(red *redact.Redactor, src string, dst io.Writer, keySpans func(path string) []span) (map[string]*Finding, error) {
	plan, err := scan(red, src)
	if err != nil {
		return nil, err
	}
	files := make([]int, 0, len(plan.placed))
	for file := range plan.placed {
		files = append(files, file)
	}
	slices.Sort(files) // the diff's order, its paths': a reader keeps its directories
	for _, file := range files {
		plan.spans[file] = keySpans(plan.placed[file])
	}
	f, err := os.Open(src)
	if err != nil {
		return nil, fmt.Errorf("changeset: %w", err)
	}
	defer f.Close()
	m := &masker{red: red, plan: plan, out: bufio.NewWriterSize(dst, 64<<10), found: map[string]*Finding{}}
	if err := m.run(newLineReader(f)); err != nil {
		return nil, err
	}
	if err := m.out.Flush(); err != nil {
		return nil, fmt.Errorf("changeset: writing the diff: %w", err)
	}
	return m.found, nil
}

// span is a run of lines, first to last, numbered from 1.
type span struct{ first, last int }

// keyWord ends every PEM private key marker: content without it holds no
// key span, and is not read line by line for one.
var keyWord = []byte("PRIVATE KEY-----")

// keySpansOf lists the lines of the content r reads that lie inside a
// private key, between its BEGIN and its END line. It reads with lr (made
// if nil) and returns it for the next file; a read that fails ends the
// list where it failed.
func keySpansOf(r io.Reader, lr *lineReader) ([]span, *lineReader) {
	var spans []span
	if lr == nil {
		lr = newLineReader(r)
	} else {
		lr.reset(r)
	}
	begin := 0 // the BEGIN line of an open key
	for n := 1; ; n++ {
		line, whole, err := lr.next()
		if err != nil {
			return spans, lr
		}
		if !whole {
			lr.skipRest()
			continue
		}
		switch redact.KeyMarker(line) {
		case redact.KeyBegins:
			begin = n
		case redact.KeyEnds:
			if begin > 0 && n > begin+1 {
				spans = append(spans, span{begin + 1, n - 1})
			}
			begin = 0
		}
	}
}

func inSpans(spans []span, n int) bool {
	for _, s := range spans {
		if n >= s.first && n <= s.last {
			return true
		}
	}
	return false
}

// sides of a hunk a line belongs to.
const (
	oldSide = 1 << iota
	newSide
)

func sidesOf(prefix byte) int {
	switch prefix {
	case '-':
		return oldSide
	case '+':
		return newSide
	}
	return oldSide | newSide
}

// plan is what the first reading of a diff decides for the second.
type plan struct {
	withhold map[int]bool // file parts (by ordinal) whose binary patch is withheld
	keyOpen  map[int]int  // hunks (by ordinal) that start inside a key, on these sides
	// Hunks that show key data on the new side before any key marker, and
	// the paths of their files: their lines are placed in the new file.
	unplaced map[int]bool
	placed   map[int]string
	spans    map[int][]span // by file part: the new file's lines inside a key
}

// cursor follows where a line of a diff stands: which file's part, which
// hunk, a binary patch or not.
type cursor struct {
	file   int    // ordinal of the file's part, from 1
	path   string // its path, as git names it
	names  string // the "diff --git" header's two names
	hunk   int    // ordinal of the hunk, from 1, over the whole diff
	inHunk bool
	binary bool
}

// kind of a whole line, given the cursor; it moves the cursor on.
type lineKind int

const (
	fileHeader lineKind = iota // "diff --git" and the lines before a hunk
	hunkHeader
	content // a hunk's context, added or removed line
	binaryData
)

func (c *cursor) step(line []byte) lineKind {
	switch {
	case bytes.HasPrefix(line, []byte("diff --git ")):
		c.file++
		c.names = strings.TrimRight(string(line[len("diff --git "):]), "\n")
		c.path = hunks.PathOf(c.names)
		c.inHunk, c.binary = false, false
		return fileHeader
	case c.binary:
		return binaryData
	case bytes.HasPrefix(line, []byte("@@")):
		c.hunk++
		c.inHunk = true
		return hunkHeader
	case c.inHunk:
		return content
	case bytes.HasPrefix(line, []byte("GIT binary patch")):
		c.binary = true
		return binaryData
	case c.path == "" && (bytes.HasPrefix(line, []byte("--- a/")) || bytes.HasPrefix(line, []byte("+++ b/"))):
		c.path = strings.TrimRight(string(line[6:]), "\n")
	}
	return fileHeader
}

// scan is the first reading: which binary patches hold a declared secret,
// and which hunks start inside a private key.
func scan(red *redact.Redactor, src string) (*plan, error) {
	f, err := os.Open(src)
	if err != nil {
		return nil, fmt.Errorf("changeset: %w", err)
	}
	defer f.Close()
	return scanFrom(red, f, nil)
}

// scanFrom is scan of the diff r reads; each line it reads goes to k as
// well, if k is not nil.
func scanFrom(red *redact.Redactor, r io.Reader, k *cleanCheck) (*plan, error) {
	p := &plan{withhold: map[int]bool{}, keyOpen: map[int]int{}, unplaced: map[int]bool{}, placed: map[int]string{}, spans: map[int][]span{}}
	lr := newLineReader(r)
	var c cursor
	seen := 0 // sides of this hunk on which a key marker was seen
	for {
		line, whole, err := lr.next()
		if err == io.EOF {
			k.end()
			return p, nil
		}
		if err != nil {
			return nil, fmt.Errorf("changeset: reading the diff: %w", err)
		}
		kind := c.step(line)
		k.line(line, whole, kind)
		if !whole {
			lr.skipRest() // no key marker or binary patch is that long
			continue
		}
		switch kind {
		case hunkHeader:
			seen = 0
		case content:
			if len(line) == 0 {
				continue
			}
			sides := sidesOf(line[0])
			switch redact.KeyMarker(line[1:]) {
			case redact.KeyEnds:
				// An END before any BEGIN on its side: the hunk starts
				// inside a key.
				p.keyOpen[c.hunk] |= sides &^ seen
				seen |= sides
			case redact.KeyBegins:
				seen |= sides
			default:
				// A line of a key's body is long (64 or 70 characters, but
				// for its last); a short word ("return") is no sign of one.
				if data := bytes.TrimRight(line[1:], "\r\n"); sides&newSide != 0 && seen&newSide == 0 && len(data) >= keyLineMin && redact.IsKeyData(data) {
					p.unplaced[c.hunk] = true
					p.placed[c.file] = c.path
				}
			}
		case binaryData:
			if bytes.HasPrefix(line, []byte("GIT binary patch")) && red.Declared() {
				if !binaryClean(red, lr) {
					p.withhold[c.file] = true
				}
			}
		}
	}
}

// masker is the second reading: it writes the masked diff.
type masker struct {
	red   *redact.Redactor
	plan  *plan
	out   *bufio.Writer
	found map[string]*Finding
	c     cursor
	batch []byte // lines of the current hunk not written yet
	open  int    // sides of the hunk inside a private key
	skip  bool
	// newLine is the number, in the new file, of the hunk's next line on
	// the new side, for a hunk placed in its new file (0 otherwise).
	newLine int
}

func (m *masker) finding() *Finding {
	p := m.red.String(m.c.path)
	f := m.found[p]
	if f == nil {
		f = &Finding{}
		m.found[p] = f
	}
	return f
}

func (m *masker) run(lr *lineReader) error {
	for {
		line, whole, err := lr.next()
		if err == io.EOF {
			return m.flush()
		}
		if err != nil {
			return fmt.Errorf("changeset: reading the diff: %w", err)
		}
		if !whole {
			if err := m.flush(); err != nil {
				return err
			}
			if err := m.long(line, lr); err != nil {
				return err
			}
			continue
		}
		if err := m.line(line); err != nil {
			return err
		}
	}
}

// line masks one whole line.
func (m *masker) line(line []byte) error {
	if m.batchable(line) {
		m.c.step(line) // a line of a hunk: the cursor stays
		m.batch = append(m.batch, line...)
		if len(m.batch) >= batchSize {
			return m.flush()
		}
		return nil
	}
	if err := m.flush(); err != nil {
		return err
	}
	kind := m.c.step(line)
	if kind == fileHeader {
		m.skip = false
		if bytes.HasPrefix(line, []byte("diff --git ")) {
			m.finding() // every file's part has its finding, masked or not
		}
	}
	if m.skip {
		return nil
	}
	var out []byte
	switch kind {
	case hunkHeader:
		m.open, m.newLine = m.plan.keyOpen[m.c.hunk], 0
		// Placed only where its new file has a key: a hunk of a file
		// without one has nothing to place, and may wait in the batch.
		if m.plan.unplaced[m.c.hunk] && len(m.plan.spans[m.c.file]) > 0 {
			m.newLine = newStart(line)
		}
		out = m.hunkHeader(line)
	case content:
		if len(line) == 0 || line[0] == '\\' {
			break // "\ No newline at end of file"
		}
		return m.contentLine(line)
	case binaryData:
		if bytes.HasPrefix(line, []byte("GIT binary patch")) && m.plan.withhold[m.c.file] {
			// The rest of this file's part is skipped.
			m.skip = true
			m.finding().Masked = true
			a, b := m.headerNames()
			_, err := fmt.Fprintf(m.out, "Binary files %s and %s differ\n", a, b)
			return err
		}
		out = m.red.Secrets(line)
	default:
		out = m.red.Bytes(line)
	}
	if out == nil {
		out = line
	} else if !bytes.Equal(out, line) {
		m.finding().Masked = true
	}
	_, err := m.out.Write(out)
	return err
}

// batchSize is how many bytes of a hunk's lines are tested together: most
// code holds nothing to mask, and one test of 64 KiB costs far less than a
// thousand tests of a line.
const batchSize = 64 << 10

// batchable reports whether line is a line of a hunk that may wait in the
// batch: no key is open and the hunk is not placed in its file (those are
// followed line by line).
func (m *masker) batchable(line []byte) bool {
	return m.c.inHunk && !m.c.binary && !m.skip && m.open == 0 && m.newLine == 0 && len(line) > 1 &&
		(line[0] == ' ' || line[0] == '+' || line[0] == '-')
}

// flush writes the batch: as it is when nothing in it can be masked or
// labelled, else line by line.
func (m *masker) flush() error {
	b := m.batch
	defer func() { m.batch = m.batch[:0] }()
	if len(b) == 0 {
		return nil
	}
	if !m.red.MayMask(b) && !bytes.Contains(b, []byte("PRIVATE KEY-----")) && !termsafe.Has(b) {
		_, err := m.out.Write(b)
		return err
	}
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line = b[:i+1]
		}
		b = b[len(line):]
		if err := m.contentLine(line); err != nil {
			return err
		}
	}
	return nil
}

// contentLine masks and writes one line of a hunk.
func (m *masker) contentLine(line []byte) error {
	text, masked := m.content(line)
	if masked {
		m.finding().Masked = true
	}
	if err := m.out.WriteByte(line[0]); err != nil {
		return err
	}
	_, err := m.out.Write(text)
	return err
}

// headerNames are the two names of the file part's header, masked.
func (m *masker) headerNames() (string, string) {
	names := m.red.String(m.c.names)
	if strings.HasPrefix(names, `"`) {
		for end := 1; end < len(names); end++ {
			if names[end] == '\\' {
				end++
			} else if names[end] == '"' {
				return names[:end+1], strings.TrimPrefix(names[end+1:], " ")
			}
		}
	}
	n := (len(names) - 1) / 2
	if n > 0 && names[n] == ' ' {
		return names[:n], names[n+1:]
	}
	return names, names
}

// content masks one line of a hunk (after its prefix: space, + or -),
// following private keys by side, and reports whether it masked anything.
func (m *masker) content(line []byte) ([]byte, bool) {
	prefix, text := line[0], line[1:]
	sides := sidesOf(prefix)
	if prefix != ' ' && termsafe.Has(text) {
		m.finding().Control = true
	}
	marker := redact.KeyMarker(text)
	switch marker {
	case redact.KeyBegins:
		m.open |= sides
	case redact.KeyEnds:
		m.open &^= sides
	}
	// Placed in the new file: a line of the new side is at newLine; a
	// removed line lies between newLine-1 and newLine.
	placed := false
	if m.newLine > 0 {
		spans := m.plan.spans[m.c.file]
		placed = inSpans(spans, m.newLine) || (prefix == '-' && inSpans(spans, m.newLine-1))
		if prefix != '-' {
			m.newLine++
		}
	}
	if marker == 0 && (m.open&sides != 0 || placed) && redact.IsKeyData(bytes.TrimRight(text, "\n")) {
		return append([]byte(keyMask), lineEnd(text)...), true
	}
	out := m.red.Bytes(text)
	return out, !bytes.Equal(out, text)
}

// hunkHeader masks a hunk header. The text git puts after it (the line
// above the hunk that looks like a function's start) is masked whole when
// it is key data and the hunk starts inside a key, or it is as long as a
// line of key data: a function's name has no such look.
func (m *masker) hunkHeader(line []byte) []byte {
	i := bytes.Index(line[2:], []byte("@@"))
	if i < 0 {
		return m.red.Bytes(line)
	}
	head, text := line[:i+4], line[i+4:]
	data := bytes.TrimSpace(text)
	inKey := m.open != 0 || (m.newLine > 0 && inSpans(m.plan.spans[m.c.file], m.newLine-1))
	if redact.IsKeyData(data) && (inKey || len(data) >= keyLineMin) {
		return append(append(append([]byte{}, head...), " "+keyMask...), lineEnd(text)...)
	}
	return m.red.Bytes(line)
}

// newStart reads the first line of a hunk's new side from its header
// ("@@ -a,b +c,d @@"); 0 if it cannot.
func newStart(line []byte) int {
	f := strings.Fields(string(line))
	if len(f) < 3 || !strings.HasPrefix(f[2], "+") {
		return 0
	}
	n, err := strconv.Atoi(strings.SplitN(f[2][1:], ",", 2)[0])
	if err != nil {
		return 0
	}
	return max(n, 1)
}

// lineEnd is the newline that ends text, CRLF or LF, if any.
func lineEnd(text []byte) []byte {
	switch {
	case bytes.HasSuffix(text, []byte("\r\n")):
		return []byte("\r\n")
	case bytes.HasSuffix(text, []byte("\n")):
		return []byte("\n")
	}
	return nil
}

// long masks a line longer than maxLine, given its first part, as a
// stream: declared secrets wherever the parts are cut, credential shapes
// as far as redact.Writer holds back.
func (m *masker) long(first []byte, lr *lineReader) error {
	kind := m.c.step(first)
	if kind == content && m.newLine > 0 && first[0] != '-' {
		m.newLine++ // it is a line of the new file: the lines after it are placed after it
	}
	var w io.Writer = io.Discard
	rw := m.red.NewWriter(m.out)
	if !m.skip {
		w = rw
	}
	check := kind == content && first[0] != ' '
	part := first
	var carry []byte // a character cut between parts
	for {
		if check && termsafe.Has(append(carry, part...)) {
			m.finding().Control = true
		}
		carry = append(carry[:0], part[max(0, len(part)-3):]...)
		if _, err := w.Write(part); err != nil {
			return err
		}
		var whole bool
		var err error
		part, whole, err = lr.next()
		if err != nil && err != io.EOF {
			return fmt.Errorf("changeset: reading the diff: %w", err)
		}
		if whole || err == io.EOF {
			if _, err := w.Write(part); err != nil {
				return err
			}
			break
		}
	}
	if err := rw.Close(); err != nil {
		return err
	}
	if rw.Masked() {
		m.finding().Masked = true
	}
	return nil
}
