package gitx

import (
	"slices"
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
