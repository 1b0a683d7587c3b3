package gitx

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestStageFindsWhatIsGone: the files gone from base are found whether
// the work tree's listing named a file once or twice (a directory read
// while a file of it is renamed and made again can name it twice), and
// with none gone there are none: stageWorkTree's count of the files base
// has counts paths.
func TestStageFindsWhatIsGone(t *testing.T) {
	oid := "0123456789012345678901234567890123456789"
	bt := newBaseTree(map[string]baseEntry{"x": {"100644", oid}, "y": {"100644", oid}})
	d := &diffRun{format: formatSHA1}
	for _, c := range []struct {
		files []string
		gone  []string
	}{
		{[]string{"x", "y"}, nil},
		{[]string{"x"}, []string{"y"}},
		{[]string{"x", "x"}, []string{"y"}},
		{nil, []string{"x", "y"}},
	} {
		tr := &treeReader{base: bt, keptLinks: map[string]bool{}}
		for _, p := range c.files {
			tr.files = append(tr.files, &wfile{path: p, mode: "100644", oid: oid})
		}
		if s := d.stageWorkTree(tr, bt); !slices.Equal(s.gone, c.gone) {
			t.Errorf("files %q: gone %q, want %q", c.files, s.gone, c.gone)
		}
	}
}

// TestMarkFindsWhatBaseHas: what a base tree marks in a walk's files
// (sorted, a path maybe twice) is what its map holds at each path, for
// paths before, between and after base's own, and a file not marked (or
// marked by another tree) is looked up.
func TestMarkFindsWhatBaseHas(t *testing.T) {
	entries := map[string]baseEntry{}
	for i, p := range []string{"a", "a-b", "a.b", "a/b", "m/n/o", "z"} {
		entries[p] = baseEntry{"100644", fmt.Sprintf("%040x", i)}
	}
	bt, other := newBaseTree(entries), newBaseTree(map[string]baseEntry{"a": {"100755", strings.Repeat("f", 40)}})
	var files []*wfile
	for _, p := range []string{"0", "a", "a", "a-a", "a-b", "a/a", "a/b", "a/c", "m/n", "m/n/o", "y", "z", "zz"} {
		files = append(files, &wfile{path: p})
	}
	bt.mark(files)
	for _, f := range files {
		want, wantOK := entries[f.path]
		if got, ok := bt.at(f); got != want || ok != wantOK {
			t.Errorf("%s: marked %v %v, base has %v %v", f.path, got, ok, want, wantOK)
		}
		if got, ok := other.at(f); ok != (f.path == "a") || (ok && got.mode != "100755") {
			t.Errorf("%s: another tree says %v %v", f.path, got, ok)
		}
	}
}
