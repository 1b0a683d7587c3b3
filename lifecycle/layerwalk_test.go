package lifecycle

import (
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// walked is what a walk of layer with ds visits, in order, skipping
// "skip" and below it.
func walked(t *testing.T, ds layerDirs, layer string) []string {
	t.Helper()
	var out []string
	err := ds.walk(layer, layerVisit{
		skip: func(rel string) bool { return rel == "skip" },
		dir: func(rel string, opaque bool) {
			out = append(out, fmt.Sprintf("dir %s opaque=%v", rel, opaque))
		},
		file: func(rel string, d fs.DirEntry) error {
			out = append(out, fmt.Sprintf("file %s %v", rel, d.Type()))
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestLayerWalkKeptListings: a walk that keeps its directories' listings
// visits what a walk that lists every directory again visits, after each
// of many random changes (names made, removed, renamed, renamed over
// another, linked, directories made and removed, replaced, made opaque
// and not); a directory changed less than layerStill before it was
// listed is not kept.
func TestLayerWalkKeptListings(t *testing.T) {
	layer := t.TempDir()
	if err := unix.Setxattr(layer, "user.overlay.opaque", []byte("y"), 0); err != nil {
		t.Skipf("this file system takes no user xattrs: %v", err)
	}
	unix.Removexattr(layer, "user.overlay.opaque")
	for _, d := range []string{"a/b/c", "a/d", "e", "skip/x"} {
		if err := os.MkdirAll(filepath.Join(layer, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	kept := layerDirs{}
	// Just changed: nothing kept.
	walked(t, kept, layer)
	if len(kept[layer]) != 0 {
		t.Fatalf("listings of directories changed just now were kept: %d", len(kept[layer]))
	}
	// Judged from an hour on, every directory has been still: all kept.
	JudgeLayersAhead(t, time.Hour)
	walked(t, kept, layer)
	if len(kept[layer]) != 6 {
		t.Fatalf("%d listings kept, want 6 (the layer, a, a/b, a/b/c, a/d, e; skip not entered)", len(kept[layer]))
	}
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 7))
	dirs := func() []string {
		var out []string
		filepath.WalkDir(layer, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				out = append(out, p)
			}
			return nil
		})
		return out
	}
	for i := range 40 {
		ds := dirs()
		d := ds[rng.IntN(len(ds))]
		name := filepath.Join(d, fmt.Sprintf("n%d", rng.IntN(6)))
		var what string
		switch rng.IntN(9) {
		case 0:
			what = "file " + name
			os.WriteFile(name, []byte("x"), 0o644)
		case 1:
			what = "dir " + name
			os.Mkdir(name, 0o755)
		case 2:
			what = "remove " + name
			os.RemoveAll(name)
		case 3:
			to := filepath.Join(ds[rng.IntN(len(ds))], fmt.Sprintf("m%d", rng.IntN(6)))
			what = "rename " + name + " " + to
			if !strings.HasPrefix(to, name+"/") {
				os.Rename(name, to)
			}
		case 4:
			what = "opaque " + d
			unix.Setxattr(d, "user.overlay.opaque", []byte("y"), 0)
		case 5:
			what = "not opaque " + d
			unix.Removexattr(d, "user.overlay.opaque")
		case 6:
			what = "link " + name
			os.Symlink("/etc", name)
		case 7:
			to := filepath.Join(ds[rng.IntN(len(ds))], fmt.Sprintf("h%d", rng.IntN(3)))
			what = "hard link " + name + " " + to
			os.Link(name, to)
		case 8:
			to := ds[rng.IntN(len(ds))]
			what = "rename over " + name + " " + to
			if to != layer && !strings.HasPrefix(to, name+"/") && !strings.HasPrefix(name, to+"/") {
				os.Rename(name, to) // over an empty directory, or refused
			}
		}
		got, want := walked(t, kept, layer), walked(t, layerDirs{}, layer)
		if n, dirs := len(kept[layer]), len(want)-strings.Count(strings.Join(want, "\n"), "file "); n != dirs+1 {
			t.Fatalf("seed %d, step %d (%s): %d listings kept, for %d directories and the layer", seed, i, what, n, dirs)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("seed %d, step %d (%s): a walk with kept listings saw\n%s\nwhere a walk listing everything saw\n%s", seed, i, what,
				strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		// The next change is made a tick of the file system's clock after
		// the listings: layerStill keeps the same tick apart outside tests.
		time.Sleep(25 * time.Millisecond)
	}
}
