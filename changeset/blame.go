package changeset

import (
	"github.com/paddock-dev/paddock/changeset/hunks"
	"github.com/pmezard/go-difflib/difflib"
)

// Where each line of a change came from: a file followed from its base
// through the versions the run's steps left (see lifecycle's provenance
// journal), line by line, as git blame follows commits.

// Version is what a file held after a step: the event Seq of the tool
// call or command that left it so.
type Version struct {
	Seq     int64
	Content []byte
}

// Origins is where a file's lines came from (see LineOrigins).
type Origins struct {
	// Added is, for each line of the last version, the Seq of the version
	// that wrote it (0: it was in base); Removed, for each line of base,
	// the Seq of the version that removed it (0: never removed).
	Added, Removed []int64
	base           []byte
	versions       []Version
}

// LineOrigins follows a file from base through versions, in order.
func LineOrigins(base []byte, versions []Version) *Origins {
	added, removed := lineOrigins(base, versions)
	return &Origins{Added: added, Removed: removed, base: base, versions: versions}
}

// byCount names the version a line git shows as added (or removed) came
// from when the line matching lined it up with base instead: a line whose
// text is there more than once (a blank line, a brace) can be matched
// with another copy of itself. It is the first version holding more
// copies of the line than base (fewer, for a removed one); 0 if none.
func (o *Origins) byCount(line string, added bool) int64 {
	count := func(b []byte) int {
		n := 0
		for _, l := range hunks.SplitLines(b) {
			if l == line {
				n++
			}
		}
		return n
	}
	inBase := count(o.base)
	for _, v := range o.versions {
		if c := count(v.Content); (added && c > inBase) || (!added && c < inBase) {
			return v.Seq
		}
	}
	return 0
}

func lineOrigins(base []byte, versions []Version) (added, removed []int64) {
	prev := hunks.SplitLines(base)
	removed = make([]int64, len(prev))
	added = make([]int64, len(prev))
	origin := make([]int, len(prev)) // each line's index in base, or -1
	for i := range origin {
		origin[i] = i
	}
	for _, v := range versions {
		next := hunks.SplitLines(v.Content)
		m := difflib.NewMatcherWithJunk(prev, next, false, nil)
		nAdded := make([]int64, len(next))
		nOrigin := make([]int, len(next))
		for _, op := range m.GetOpCodes() {
			switch op.Tag {
			case 'e':
				for k := 0; k < op.I2-op.I1; k++ {
					nAdded[op.J1+k], nOrigin[op.J1+k] = added[op.I1+k], origin[op.I1+k]
				}
			default: // r, d, i
				for i := op.I1; i < op.I2; i++ {
					if origin[i] >= 0 {
						removed[origin[i]] = v.Seq
					}
				}
				for j := op.J1; j < op.J2; j++ {
					nAdded[j], nOrigin[j] = v.Seq, -1
				}
			}
		}
		prev, added, origin = next, nAdded, nOrigin
	}
	return added, removed
}

// HunkOrigins is, for each hunk of s, the Seqs its added and removed
// lines came from (given the file's Origins), in first-seen order; 0
// stands for a line whose origin is not known.
func HunkOrigins(s *hunks.Section, o *Origins) map[int][]int64 {
	added, removed := o.Added, o.Removed
	out := map[int][]int64{}
	for _, h := range s.Hunks {
		seen := map[int64]bool{}
		var seqs []int64
		note := func(seq int64) {
			if !seen[seq] {
				seen[seq] = true
				seqs = append(seqs, seq)
			}
		}
		oi, ni := h.OldFrom(), h.NewFrom()
		for _, l := range h.Lines {
			switch {
			case l == "" || l[0] == '\\':
			case l[0] == '-':
				seq := int64(0)
				if oi < len(removed) {
					seq = removed[oi]
				}
				if seq == 0 {
					seq = o.byCount(l[1:], false)
				}
				note(seq)
				oi++
			case l[0] == '+':
				seq := int64(0)
				if ni < len(added) {
					seq = added[ni]
				}
				if seq == 0 {
					seq = o.byCount(l[1:], true)
				}
				note(seq)
				ni++
			default:
				oi, ni = oi+1, ni+1
			}
		}
		out[h.N] = seqs
	}
	return out
}
