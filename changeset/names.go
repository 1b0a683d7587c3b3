package changeset

import (
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/confine"
	"golang.org/x/text/unicode/norm"
)

// # Names a reviewer cannot tell apart
//
// Two names that differ only in Unicode normalisation (café composed and
// decomposed) look the same on every screen; two that differ only in case
// are one file on macOS and Windows; a look-alike or an invisible character
// makes one name read as another. A change set that makes such a pair, in
// itself or with a path the base already has, shows a reviewer two entries
// (or one entry beside a file they know) that are not what they seem. Each
// entry whose path, or a directory on it, so collides is labelled
// name_collision, with a note naming the other path and how they differ
// (confine.Alike). A pair both of whose names the base already had is the
// project's own and is not labelled; deleted paths do not count.
//
// A created name not in NFC is labelled unnormalised_name: it shows as its
// composed spelling, which is another name, and git on macOS reads it back
// composed.

// pathSpelling is one spelling of a path in the tree a change set makes.
type pathSpelling struct {
	raw             string
	inBase, changed bool
}

// spellings groups the spellings of the paths a change set makes (its
// entries and the directories above them) and of the base's paths beside
// them, by their folded form.
type spellings map[string]map[string]*pathSpelling

func (s spellings) add(raw string, inBase, changed bool) {
	k := confine.FoldPath(raw)
	g := s[k]
	if g == nil {
		g = map[string]*pathSpelling{}
		s[k] = g
	}
	sp := g[raw]
	if sp == nil {
		sp = &pathSpelling{raw: raw}
		g[raw] = sp
	}
	sp.inBase = sp.inBase || inBase
	sp.changed = sp.changed || changed
}

// prefixes are p's directories, top first, and p itself.
func prefixes(p string) []string {
	var out []string
	for i := 0; i < len(p); i++ {
		if p[i] == '/' {
			out = append(out, p[:i])
		}
	}
	return append(out, p)
}

func parentDir(p string) string {
	if d := path.Dir(p); d != "." {
		return d
	}
	return ""
}

// entryDirs are the directories (base's names: "" is the top) that hold an
// entry that is not a deletion, or a directory above one.
func entryDirs(entries []paddock.ChangeEntry) []string {
	seen := map[string]bool{}
	var dirs []string
	for _, e := range entries {
		if e.Op == paddock.OpDelete {
			continue
		}
		for _, q := range prefixes(e.Path) {
			if d := parentDir(q); !seen[d] {
				seen[d] = true
				dirs = append(dirs, d)
			}
		}
	}
	sort.Strings(dirs)
	return dirs
}

// labelAcross sets the labels that compare an entry with the others and
// with the base, from r, what readAcross read of the trees.
func labelAcross(entries []paddock.ChangeEntry, root string, policy *confine.Policy, trees Trees, r *acrossReads) error {
	if r.err != nil {
		return r.err
	}
	labelNames(entries, r.names)
	return labelSourced(entries, root, policy, trees, r)
}

// acrossReads is what the labels across the entries read of the trees:
// the base's names in the entries' directories (nil: the base is not
// known) and the project's .envrc files there. It depends on the entries'
// paths alone, so it can be read while each entry is labelled alone.
type acrossReads struct {
	dirs  []string
	names map[string][]string
	host  map[string][]byte // by path, the .envrc files of dirs the host has
	err   error
}

// readAcross reads what the labels across the entries in dirs (see
// entryDirs) need: the base's names and the host's .envrc files, side by
// side.
func readAcross(dirs []string, trees Trees) *acrossReads {
	r := &acrossReads{dirs: dirs}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if trees.Host == nil {
			return
		}
		envrcs := make([]string, len(dirs))
		for i, d := range dirs {
			envrcs[i] = path.Join(d, ".envrc")
		}
		r.host = readFiles(trees.Host, envrcs)
	}()
	if trees.Base != nil {
		var err error
		if r.names, err = trees.Base.Names(dirs); err != nil {
			r.err = fmt.Errorf("changeset: reading the base's names: %w", err)
		}
	}
	<-done
	return r
}

// labelNames labels the entries whose names collide (name_collision, with a
// note) or are not in NFC (unnormalised_name). names are the names base
// holds in the directories of entryDirs (nil: the base is not known, and
// only the change set's own paths are compared).
func labelNames(entries []paddock.ChangeEntry, names map[string][]string) {
	deleted := map[string]bool{}
	for _, e := range entries {
		if e.Op == paddock.OpDelete {
			deleted[e.Path] = true
		}
	}
	s := spellings{}
	wanted := map[string]map[string]bool{} // dir → folded names of the change set's paths in it
	for _, e := range entries {
		if e.Op == paddock.OpDelete {
			continue
		}
		// A modified path, and the directories above it, are the base's.
		for _, q := range prefixes(e.Path) {
			s.add(q, e.Op == paddock.OpModify, true)
			d := parentDir(q)
			if wanted[d] == nil {
				wanted[d] = map[string]bool{}
			}
			wanted[d][confine.Fold(path.Base(q))] = true
		}
	}
	for d, ns := range names {
		for _, n := range ns {
			q := path.Join(d, n)
			if wanted[d][confine.Fold(n)] && !deleted[q] {
				s.add(q, true, false)
			}
		}
	}
	for i := range entries {
		e := &entries[i]
		if e.Op == paddock.OpDelete {
			continue
		}
		if e.Op == paddock.OpCreate && !norm.NFC.IsNormalString(e.Path) {
			addRisk(e, "unnormalised_name")
		}
		var notes []string
		for _, q := range prefixes(e.Path) {
			g := s[confine.FoldPath(q)]
			if len(g) < 2 || !hasNew(g) {
				continue
			}
			for _, other := range sortedSpellings(g) {
				if other.raw == q {
					continue
				}
				where := "in the change set"
				if other.inBase {
					where = "in the base"
				}
				what := "collides with"
				if q != e.Path {
					what = "its directory " + q + " collides with"
				}
				notes = append(notes, fmt.Sprintf("%s %s (%s): they differ only in %s", what, other.raw, where, confine.Alike(q, other.raw)))
			}
		}
		if len(notes) > 0 {
			addRisk(e, "name_collision")
			addNote(e, "name_collision", strings.Join(notes, "; "))
		}
	}
}

// hasNew reports whether a spelling of the group is not the base's: a
// collision the base had already is the project's own.
func hasNew(g map[string]*pathSpelling) bool {
	for _, sp := range g {
		if !sp.inBase {
			return true
		}
	}
	return false
}

func sortedSpellings(g map[string]*pathSpelling) []*pathSpelling {
	out := make([]*pathSpelling, 0, len(g))
	for _, sp := range g {
		out = append(out, sp)
	}
	slices.SortFunc(out, func(a, b *pathSpelling) int { return strings.Compare(a.raw, b.raw) })
	return out
}

func addNote(e *paddock.ChangeEntry, label, note string) {
	if e.Notes == nil {
		e.Notes = map[string]string{}
	}
	if old := e.Notes[label]; old != "" {
		note = old + "; " + note
	}
	e.Notes[label] = note
}
