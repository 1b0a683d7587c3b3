package lifecycle

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"
)

// oldChanges is what a write's look recorded before changesAmong, written
// out as it was: the whole journal copied (maps.Clone(st.last)), the
// written files put in it (deleted where back as the base has them), and
// the whole compared with the journal.
func oldChanges(st *provState, now map[string]string) map[string]string {
	changes := map[string]string{}
	for p, b := range now {
		if prev, ok := st.last[p]; !ok || prev != b {
			changes[p] = b
		}
	}
	for p := range st.last {
		if _, ok := now[p]; !ok && st.last[p] != "base" {
			changes[p] = "base"
			delete(st.seen, p)
		}
	}
	return changes
}

// TestChangesAmongAsBefore: what a call that wrote only some files
// records (changesAmong, its files alone compared with the journal) is
// what comparing the whole journal recorded before it (oldChanges), and
// what changesTo records, with the same stat cache left, for random
// journals and writes: new files, files changed again, written twice,
// written back as before, and written back as the base has them, whether
// the journal said so or not.
func TestChangesAmongAsBefore(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 5000 {
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
		whole := maps.Clone(last) // as the old look began
		written := map[string]string{}
		var among []string
		for range rng.IntN(4) + 1 {
			p := fmt.Sprintf("f%d", rng.IntN(10))
			among = append(among, p)
			delete(whole, p)
			delete(written, p)
			if rng.IntN(3) > 0 { // else back as the base has it: deleted
				b := fmt.Sprintf("blob%d", rng.IntN(3))
				whole[p], written[p] = b, b
			}
		}
		before := &provState{last: maps.Clone(last), seen: seen()}
		to := &provState{last: maps.Clone(last), seen: seen()}
		now := &provState{last: maps.Clone(last), seen: seen()}
		want := oldChanges(before, whole)
		for name, got := range map[string]map[string]string{
			"changesAmong": now.changesAmong(written, among),
			"changesTo":    to.changesTo(whole),
		} {
			if !maps.Equal(want, got) {
				t.Fatalf("round %d: journal %v, written %v %v: %s says %v, before %v", round, last, among, written, name, got, want)
			}
		}
		for name, st := range map[string]*provState{"changesAmong": now, "changesTo": to} {
			if !maps.Equal(before.seen, st.seen) {
				t.Fatalf("round %d: %s leaves seen %v, before %v", round, name, st.seen, before.seen)
			}
		}
	}
}
