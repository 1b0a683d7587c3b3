package changeset

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/internal/lazyre"
)

// A change set's diff read into its parts: each file's section and its
// hunks, numbered over the whole diff. A hunk is the unit a person can
// approve on its own (Partial); a file's section without hunks (a binary
// file, a mode change, an empty file) is one unit.

// Section is one file's part of a change set's diff.
type Section struct {
	Path   string
	Header []string // the lines before its first hunk, each with its "\n"
	Hunks  []*Hunk
	Rest   []string // a binary patch's lines
	// N numbers a section without hunks as a unit (0 when it has hunks).
	N int
}

// Hunk is one hunk of a section: its ranges, its header and its lines.
type Hunk struct {
	N                  int // from 1, over the whole diff
	OldStart, OldLines int
	NewStart, NewLines int
	Header             string   // "@@ -a,b +c,d @@ …\n"
	Lines              []string // each with its "\n"
}

var hunkHeaderRe = lazyre.New(`^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@(.*)$`)

// MaxHunkDiff bounds the diff ParseDiff reads: hunks are for review, and
// a diff larger than this is approved whole.
const MaxHunkDiff = 64 << 20

// ParseDiff reads a change set's unified diff into its sections.
func ParseDiff(r io.Reader) ([]*Section, error) {
	br := bufio.NewReaderSize(io.LimitReader(r, MaxHunkDiff+1), 64<<10)
	var out []*Section
	var cur *Section
	var h *Hunk
	n, read := 0, 0
	for {
		line, err := br.ReadString('\n')
		read += len(line)
		if read > MaxHunkDiff {
			return nil, paddock.Errorf(paddock.CodeTooLarge, "the diff is larger than %d bytes: approve it whole", MaxHunkDiff)
		}
		if line != "" {
			switch {
			case strings.HasPrefix(line, "diff --git "):
				cur = &Section{Path: pathOf(strings.TrimRight(line[len("diff --git "):], "\n")), Header: []string{line}}
				out = append(out, cur)
				h = nil
			case cur == nil:
				return nil, fmt.Errorf("changeset: the diff does not start with a file's header")
			case strings.HasPrefix(line, "@@") && len(cur.Rest) == 0:
				m := hunkHeaderRe.Regexp().FindStringSubmatch(strings.TrimRight(line, "\n"))
				if m == nil {
					return nil, fmt.Errorf("changeset: unreadable hunk header %q", line)
				}
				n++
				h = &Hunk{N: n, OldStart: atoi(m[1]), OldLines: count(m[2]), NewStart: atoi(m[3]), NewLines: count(m[4]), Header: line}
				cur.Hunks = append(cur.Hunks, h)
			case h != nil:
				h.Lines = append(h.Lines, line)
			case strings.HasPrefix(line, "GIT binary patch") || len(cur.Rest) > 0:
				cur.Rest = append(cur.Rest, line)
			default:
				cur.Header = append(cur.Header, line)
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("changeset: reading the diff: %w", err)
		}
	}
	// A section without hunks is a unit of its own, numbered after the
	// hunks before it.
	n = 0
	for _, s := range out {
		if len(s.Hunks) == 0 {
			n++
			s.N = n
			continue
		}
		for _, h := range s.Hunks {
			n++
			h.N = n
		}
	}
	return out, nil
}

func atoi(s string) int {
	v, _ := strconv.Atoi(s)
	return v
}

// count is a hunk range's length: 1 when git leaves it out.
func count(s string) int {
	if s == "" {
		return 1
	}
	return atoi(s)
}

// Units counts the units of sections.
func Units(sections []*Section) int {
	n := 0
	for _, s := range sections {
		n += max(len(s.Hunks), 1)
	}
	return n
}

// SplitLines splits content into lines, each with its "\n" (the last one
// may have none).
func SplitLines(b []byte) []string {
	if len(b) == 0 {
		return nil
	}
	var out []string
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			out = append(out, string(b))
			break
		}
		out = append(out, string(b[:i+1]))
		b = b[i+1:]
	}
	return out
}

// oldFrom is where a hunk's old range starts, 0-based: git names the line
// before an empty range.
func (h *Hunk) oldFrom() int {
	if h.OldLines == 0 {
		return h.OldStart
	}
	return h.OldStart - 1
}

func (h *Hunk) newFrom() int {
	if h.NewLines == 0 {
		return h.NewStart
	}
	return h.NewStart - 1
}

// PartialContent is base with the chosen hunks of s made as they are in
// final, the others left as in base.
func PartialContent(s *Section, chosen map[int]bool, base, final []byte) ([]byte, error) {
	bl, fl := SplitLines(base), SplitLines(final)
	var out strings.Builder
	bi := 0
	for _, h := range s.Hunks {
		from := h.oldFrom()
		if from < bi || from+h.OldLines > len(bl) || h.newFrom()+h.NewLines > len(fl) {
			return nil, fmt.Errorf("changeset: hunk %d of %s does not fit its file", h.N, s.Path)
		}
		for _, l := range bl[bi:from] {
			out.WriteString(l)
		}
		lines := bl[from : from+h.OldLines]
		if chosen[h.N] {
			lines = fl[h.newFrom() : h.newFrom()+h.NewLines]
		}
		for _, l := range lines {
			out.WriteString(l)
		}
		bi = from + h.OldLines
	}
	for _, l := range bl[bi:] {
		out.WriteString(l)
	}
	return []byte(out.String()), nil
}

// partialSection is s's diff with only the chosen hunks, its index line
// naming newBlob and each hunk's new range moved by what the left-out
// hunks before it would have added.
func partialSection(s *Section, chosen map[int]bool, newBlob string) string {
	var b strings.Builder
	for _, l := range s.Header {
		if strings.HasPrefix(l, "index ") {
			l = reindex(l, newBlob)
		}
		b.WriteString(l)
	}
	shift := 0
	for _, h := range s.Hunks {
		if !chosen[h.N] {
			shift += h.NewLines - h.OldLines
			continue
		}
		m := hunkHeaderRe.Regexp().FindStringSubmatch(strings.TrimRight(h.Header, "\n"))
		fmt.Fprintf(&b, "@@ -%s +%s @@%s\n", hunkRange(h.OldStart, h.OldLines), hunkRange(h.NewStart-shift, h.NewLines), m[5])
		for _, l := range h.Lines {
			b.WriteString(l)
		}
	}
	return b.String()
}

func hunkRange(start, n int) string {
	if n == 1 {
		return strconv.Itoa(start)
	}
	return fmt.Sprintf("%d,%d", start, n)
}

// reindex names blob as the new side of an "index OLD..NEW[ MODE]" line,
// abbreviated as NEW was.
func reindex(line, blob string) string {
	rest := strings.TrimPrefix(strings.TrimRight(line, "\n"), "index ")
	ids, mode, _ := strings.Cut(rest, " ")
	old, nw, ok := strings.Cut(ids, "..")
	if !ok || len(nw) > len(blob) {
		return line
	}
	out := "index " + old + ".." + blob[:len(nw)]
	if mode != "" {
		out += " " + mode
	}
	return out + "\n"
}

// Partial is the change set made of cs's chosen units only (see
// ParseDiff): an entry all of whose units are chosen is kept as it is; one
// with none is left out; a modified text file with some of its hunks
// chosen gets the content base(path) has with those hunks made as in its
// new content (final(entry)). It returns the change set (hashed, its diff
// inline or, when large, to be written by the caller from Diff) and the
// new contents by blob id. Entries with no part in the diff (never
// applied) are left out.
func Partial(cs *paddock.ChangeSet, sections []*Section, chosen []int, base func(path string) ([]byte, error), final func(e paddock.ChangeEntry) ([]byte, error)) (*paddock.ChangeSet, map[string][]byte, error) {
	units := Units(sections)
	want := map[int]bool{}
	for _, n := range chosen {
		want[n] = true
	}
	if len(chosen) > 0 && (slices.Min(chosen) < 1 || slices.Max(chosen) > units) {
		return nil, nil, paddock.Errorf(paddock.CodeBadRequest, "hunks %d to %d: the change set has hunks 1 to %d (paddock diff RUN --blame numbers them)", slices.Min(chosen), slices.Max(chosen), units)
	}
	if len(want) == 0 {
		return nil, nil, paddock.Errorf(paddock.CodeBadRequest, "choose at least one hunk")
	}
	byPath := map[string]*Section{}
	for _, s := range sections {
		byPath[s.Path] = s
	}
	out := &paddock.ChangeSet{RunID: cs.RunID, BaseRevision: cs.BaseRevision, Entries: []paddock.ChangeEntry{}, ComputedAt: cs.ComputedAt, Ignored: cs.Ignored}
	blobs := map[string][]byte{}
	var diff strings.Builder
	for _, e := range cs.Entries {
		s := byPath[e.Path]
		if s == nil {
			continue
		}
		var picked []int
		for _, h := range s.Hunks {
			if want[h.N] {
				picked = append(picked, h.N)
			}
		}
		switch {
		case len(s.Hunks) == 0 && !want[s.N], len(s.Hunks) > 0 && len(picked) == 0:
			continue // none of it
		case len(s.Hunks) == 0 || len(picked) == len(s.Hunks):
			out.Entries = append(out.Entries, e)
			writeSection(&diff, s)
			continue
		case e.Op != paddock.OpModify || e.Binary:
			return nil, nil, paddock.Errorf(paddock.CodeBadRequest, "%s is %s whole: choose all of its hunks (%s) or none", e.Path, e.Op, hunkList(s))
		}
		b, err := base(e.Path)
		if err != nil {
			return nil, nil, err
		}
		f, err := final(e)
		if err != nil {
			return nil, nil, err
		}
		content, err := PartialContent(s, want, b, f)
		if err != nil {
			return nil, nil, err
		}
		pe := e
		pe.NewBlob, pe.Size = BlobID(content), int64(len(content))
		blobs[pe.NewBlob] = content
		out.Entries = append(out.Entries, pe)
		diff.WriteString(partialSection(s, want, pe.NewBlob))
	}
	out.Diff, out.DiffSize = diff.String(), int64(diff.Len())
	if out.DiffSize > paddock.InlineDiff {
		out.DiffOmitted = true // the caller writes Diff to the change set's diff file
	}
	var err error
	if out.DiffOmitted {
		return out, blobs, nil
	}
	if out.Hash, err = Hash(out); err != nil {
		return nil, nil, err
	}
	return out, blobs, nil
}

func writeSection(b *strings.Builder, s *Section) {
	for _, l := range s.Header {
		b.WriteString(l)
	}
	for _, h := range s.Hunks {
		b.WriteString(h.Header)
		for _, l := range h.Lines {
			b.WriteString(l)
		}
	}
	for _, l := range s.Rest {
		b.WriteString(l)
	}
}

func hunkList(s *Section) string {
	var ns []string
	for _, h := range s.Hunks {
		ns = append(ns, strconv.Itoa(h.N))
	}
	return strings.Join(ns, ", ")
}

// ParseUnits reads a list of hunk numbers and ranges: "1,3-5".
func ParseUnits(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		lo, hi, isRange := strings.Cut(f, "-")
		a, err1 := strconv.Atoi(lo)
		b := a
		var err2 error
		if isRange {
			b, err2 = strconv.Atoi(hi)
		}
		if err1 != nil || err2 != nil || a < 1 || b < a || b-a > 100000 {
			return nil, paddock.Errorf(paddock.CodeBadRequest, "hunks %q: want numbers and ranges such as 1,3-5", s)
		}
		for n := a; n <= b; n++ {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}
