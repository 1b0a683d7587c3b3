// Package hunks reads a change set's unified diff into its parts: each
// file's section and its hunks, numbered over the whole diff, the units a
// person approves one by one (changeset.Partial) and blame reports on. It
// is a leaf of the standard library only: the CLI numbers the hunks of a
// diff it prints with it, and links nothing of the change set's
// computation.
package hunks

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/paddock-dev/paddock"
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
	Context            string   // what follows the header's closing "@@" (" func f() {"), without its "\n"
	Lines              []string // each with its "\n"
}

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
				cur = &Section{Path: PathOf(strings.TrimRight(line[len("diff --git "):], "\n")), Header: []string{line}}
				out = append(out, cur)
				h = nil
			case cur == nil:
				return nil, fmt.Errorf("changeset: the diff does not start with a file's header")
			case strings.HasPrefix(line, "@@") && len(cur.Rest) == 0:
				h = parseHeader(strings.TrimRight(line, "\n"))
				if h == nil {
					return nil, fmt.Errorf("changeset: unreadable hunk header %q", line)
				}
				n++
				h.N, h.Header = n, line
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

// parseHeader reads a hunk header's ranges, "@@ -a[,b] +c[,d] @@…"
// (a range's length is 1 when git leaves it out), or returns nil.
func parseHeader(line string) *Hunk {
	rest, ok := strings.CutPrefix(line, "@@ -")
	if !ok {
		return nil
	}
	old, rest, ok := strings.Cut(rest, " +")
	if !ok {
		return nil
	}
	nw, context, ok := strings.Cut(rest, " @@")
	if !ok || strings.Contains(context, "\n") {
		return nil
	}
	h := &Hunk{Context: context}
	if !hunkRange(old, &h.OldStart, &h.OldLines) || !hunkRange(nw, &h.NewStart, &h.NewLines) {
		return nil
	}
	return h
}

// hunkRange reads "start[,lines]", both of digits only.
func hunkRange(s string, start, lines *int) bool {
	a, b, hasLines := strings.Cut(s, ",")
	*lines = 1
	if !digits(a) || (hasLines && !digits(b)) {
		return false
	}
	*start, _ = strconv.Atoi(a)
	if hasLines {
		*lines, _ = strconv.Atoi(b)
	}
	return true
}

func digits(s string) bool {
	if s == "" || len(s) > 18 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
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

// OldFrom is where a hunk's old range starts, 0-based: git names the line
// before an empty range.
func (h *Hunk) OldFrom() int {
	if h.OldLines == 0 {
		return h.OldStart
	}
	return h.OldStart - 1
}

func (h *Hunk) NewFrom() int {
	if h.NewLines == 0 {
		return h.NewStart
	}
	return h.NewStart - 1
}

// PathOf reads the path out of a "diff --git A B" header's names. There
// are no renames in a change set's diff, so A and B name the same path
// behind prefixes of one length (a/ and b/ unless the repository's
// configuration says otherwise), each quoted C-style when git quotes it.
func PathOf(names string) string {
	var a, b string
	if strings.HasPrefix(names, `"`) {
		end := 1
		for end < len(names) && names[end] != '"' {
			if names[end] == '\\' {
				end++
			}
			end++
		}
		if end >= len(names) {
			return ""
		}
		var err1, err2 error
		a, err1 = strconv.Unquote(names[:end+1])
		b, err2 = strconv.Unquote(strings.TrimPrefix(names[end+1:], " "))
		if err1 != nil || err2 != nil {
			return ""
		}
	} else {
		n := (len(names) - 1) / 2
		if len(names)%2 == 0 || names[n] != ' ' {
			return ""
		}
		a, b = names[:n], names[n+1:]
	}
	if a == b {
		return a // no prefixes
	}
	i, j := strings.IndexByte(a, '/'), strings.IndexByte(b, '/')
	if i < 0 || i != j || a[i+1:] != b[j+1:] {
		return ""
	}
	return a[i+1:]
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
