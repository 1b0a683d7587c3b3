package lifecycle

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"
)

// TestChangesAmongAsChangesTo: what a call that wrote only some files
// records (changesAmong, its files alone compared with the journal) is
// what comparing the whole (changesTo) records, for random journals and
// writes: new files, files changed again, written back as before, and
// written back as the base has them, whether the journal said so or not.
func TestChangesAmongAsChangesTo(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 2000 {
		last := map[string]string{}
		for i := range rng.IntN(8) {
			v := fmt.Sprintf("blob%d", rng.IntN(3))
			if rng.IntN(4) == 0 {
				v = "base"
			}
			last[fmt.Sprintf("f%d", i)] = v
		}
		seen := func() map[string]upperFile {
			m := map[string]upperFile{}
			for p := range last {
				m[p] = upperFile{blob: last[p]}
			}
			return m
		}
		// The whole now: the journal's changed paths, and the written ones
		// as they are after the call (absent: as the base has them).
		whole := map[string]string{}
		for p, b := range last {
			if b != "base" {
				whole[p] = b
			}
		}
		written := map[string]string{}
		var among []string
		for range rng.IntN(4) + 1 {
			p := fmt.Sprintf("f%d", rng.IntN(10))
			among = append(among, p)
			delete(whole, p)
			delete(written, p)
			if rng.IntN(3) > 0 {
				b := fmt.Sprintf("blob%d", rng.IntN(3))
				whole[p], written[p] = b, b
			}
		}
		a := &provState{last: maps.Clone(last), seen: seen()}
		b := &provState{last: maps.Clone(last), seen: seen()}
		want, got := a.changesTo(whole), b.changesAmong(written, among)
		if !maps.Equal(want, got) {
			t.Fatalf("round %d: journal %v, written %v %v: among says %v, the whole %v", round, last, among, written, got, want)
		}
		if !maps.EqualFunc(a.seen, b.seen, func(x, y upperFile) bool { return x == y }) {
			t.Fatalf("round %d: seen %v, the whole leaves %v", round, b.seen, a.seen)
		}
	}
}
