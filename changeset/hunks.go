package changeset

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/changeset/hunks"
)

// PartialContent is base with the chosen hunks of s made as they are in
// final, the others left as in base.
func PartialContent(s *hunks.Section, chosen map[int]bool, base, final []byte) ([]byte, error) {
	bl, fl := hunks.SplitLines(base), hunks.SplitLines(final)
	var out strings.Builder
	bi := 0
	for _, h := range s.Hunks {
		from := h.OldFrom()
		if from < bi || from+h.OldLines > len(bl) || h.NewFrom()+h.NewLines > len(fl) {
			return nil, fmt.Errorf("changeset: hunk %d of %s does not fit its file", h.N, s.Path)
		}
		for _, l := range bl[bi:from] {
			out.WriteString(l)
		}
		lines := bl[from : from+h.OldLines]
		if chosen[h.N] {
			lines = fl[h.NewFrom() : h.NewFrom()+h.NewLines]
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
func partialSection(s *hunks.Section, chosen map[int]bool, newBlob string) string {
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
		fmt.Fprintf(&b, "@@ -%s +%s @@%s\n", hunkRange(h.OldStart, h.OldLines), hunkRange(h.NewStart-shift, h.NewLines), h.Context)
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
func Partial(cs *paddock.ChangeSet, sections []*hunks.Section, chosen []int, base func(path string) ([]byte, error), final func(e paddock.ChangeEntry) ([]byte, error)) (*paddock.ChangeSet, map[string][]byte, error) {
	units := hunks.Units(sections)
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
	byPath := map[string]*hunks.Section{}
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

func writeSection(b *strings.Builder, s *hunks.Section) {
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

func hunkList(s *hunks.Section) string {
	var ns []string
	for _, h := range s.Hunks {
		ns = append(ns, strconv.Itoa(h.N))
	}
	return strings.Join(ns, ", ")
}
