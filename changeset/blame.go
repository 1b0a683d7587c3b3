package changeset

import (
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

// LineOrigins follows a file from base through versions, in order. It
// returns, for each line of the last version, the Seq of the version that
// wrote it (0: it was in base), and for each line of base, the Seq of the
// version that removed it (0: never removed).
func LineOrigins(base []byte, versions []Version) (added, removed []int64) {
	prev := SplitLines(base)
	removed = make([]int64, len(prev))
	added = make([]int64, len(prev))
	origin := make([]int, len(prev)) // each line's index in base, or -1
	for i := range origin {
		origin[i] = i
	}
	for _, v := range versions {
		next := SplitLines(v.Content)
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
// lines came from (given LineOrigins of the file), in first-seen order;
// 0 stands for a line whose origin is not known.
func HunkOrigins(s *Section, added, removed []int64) map[int][]int64 {
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
		oi, ni := h.oldFrom(), h.newFrom()
		for _, l := range h.Lines {
			switch {
			case l == "" || l[0] == '\\':
			case l[0] == '-':
				if oi < len(removed) {
					note(removed[oi])
				} else {
					note(0)
				}
				oi++
			case l[0] == '+':
				if ni < len(added) {
					note(added[ni])
				} else {
					note(0)
				}
				ni++
			default:
				oi, ni = oi+1, ni+1
			}
		}
		out[h.N] = seqs
	}
	return out
}
