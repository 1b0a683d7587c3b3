package gitx

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
)

var randomNames = []string{"a", "a-b", "a.b", "a0", "b", "ab", "z"}

func randomPath(rng *rand.Rand) string {
	n := 1 + rng.IntN(3)
	parts := make([]string, n)
	for i := range parts {
		parts[i] = randomNames[rng.IntN(len(randomNames))]
	}
	return strings.Join(parts, "/")
}

// clashes reports whether p is a directory of q or q of p.
func clashes(p string, set map[string]string) bool {
	for q := range set {
		if strings.HasPrefix(q, p+"/") || strings.HasPrefix(p, q+"/") {
			return true
		}
	}
	return false
}

// TestWriteIndexAsGitDoesRandomly: writeIndex against git's read-tree and
// update-index -z --index-info, on random bases (files, executables,
// links, gitlinks, names sorting around /) and random lines (removals,
// directories made files with some or all of their files removed, files
// under files, lines in any order), in SHA-1 and SHA-256 repositories:
// every index it writes is git's, in ls-files --stage and in the diff.
// PADDOCK_INDEX_ITERS and PADDOCK_INDEX_SEED widen it (a review ran
// 16,000 written and 12,000 left to git over three seeds).
func TestWriteIndexAsGitDoesRandomly(t *testing.T) {
	for _, fmtName := range []string{"sha1", "sha256"} {
		t.Run(fmtName, func(t *testing.T) { writeIndexRandomly(t, fmtName) })
	}
}

func writeIndexRandomly(t *testing.T, fmtName string) {
	dir := t.TempDir()
	repo := bareRepo(t, dir, fmtName)
	format := formatSHA1
	if fmtName == "sha256" {
		format = formatSHA256
	}
	hexLen := format.new().Size() * 2
	must := func(stdin []byte, index string, args ...string) []byte {
		return plainGit(t, repo, index, stdin, args...)
	}
	var blobs []string
	for i := range 4 {
		blobs = append(blobs, strings.TrimSpace(string(must([]byte(fmt.Sprintf("blob %d\n", i)), filepath.Join(dir, "none"), "hash-object", "-w", "--stdin"))))
	}
	gitlinks := []string{strings.Repeat("ab", hexLen/2), strings.Repeat("cd", hexLen/2)}
	modes := []string{"100644", "100755", "120000", "160000"}
	oidFor := func(rng *rand.Rand, mode string) string {
		if mode == "160000" {
			return gitlinks[rng.IntN(2)]
		}
		return blobs[rng.IntN(len(blobs))]
	}
	iters := 12
	if s := os.Getenv("PADDOCK_INDEX_ITERS"); s != "" {
		fmt.Sscan(s, &iters)
	}
	seed := uint64(22)
	if s := os.Getenv("PADDOCK_INDEX_SEED"); s != "" {
		fmt.Sscan(s, &seed)
	}
	rng := rand.New(rand.NewPCG(seed, uint64(len(fmtName))))
	replacedDir, replacedFile, firstLast := 0, 0, 0
	written, refused := 0, 0
	for it := range iters {
		// A random base (possibly empty).
		base := map[string]string{}
		for range rng.IntN(9) {
			p := randomPath(rng)
			if _, ok := base[p]; ok || clashes(p, base) {
				continue
			}
			base[p] = modes[rng.IntN(4)]
		}
		var baseInfo bytes.Buffer
		for p, m := range base {
			indexLine(&baseInfo, m, oidFor(rng, m), p)
		}
		made := filepath.Join(dir, fmt.Sprintf("made%d.index", it))
		must(baseInfo.Bytes(), made, "update-index", "-z", "--add", "--index-info")
		tree := strings.TrimSpace(string(must(nil, made, "write-tree")))
		commit := strings.TrimSpace(string(must(nil, made, "commit-tree", "-m", "base", tree)))
		bt := newBaseTree(parseTree(must(nil, made, "ls-tree", "-r", "-z", "--full-tree", commit)))
		if len(bt.entries) != len(base) {
			t.Fatalf("base has %d entries, want %d", len(bt.entries), len(base))
		}
		baseIndex := filepath.Join(dir, "base.index")
		os.Remove(baseIndex)
		must(nil, baseIndex, "read-tree", commit)
		baseIdx, _ := os.ReadFile(baseIndex)
		var basePaths []string
		for p := range base {
			basePaths = append(basePaths, p)
		}
		sort.Strings(basePaths)
		for range 12 {
			// Random change lines: near base paths, their directories, or new.
			var info bytes.Buffer
			var dirList []string
			for d := range bt.dirs {
				dirList = append(dirList, d)
			}
			sort.Strings(dirList)
			if len(dirList) > 0 && rng.IntN(2) == 0 {
				// A directory of base made a file: its files all or partly removed.
				d := dirList[rng.IntN(len(dirList))]
				var lines [][3]string
				for _, p := range basePaths {
					if strings.HasPrefix(p, d+"/") && rng.IntN(6) != 0 {
						lines = append(lines, [3]string{"0", strings.Repeat("0", hexLen), p})
					}
				}
				m := modes[rng.IntN(4)]
				lines = append(lines, [3]string{m, oidFor(rng, m), d})
				if rng.IntN(3) == 0 { // and something under the file, or a sibling
					lines = append(lines, [3]string{"100644", blobs[1], d + "/" + randomNames[rng.IntN(len(randomNames))]})
				}
				rng.Shuffle(len(lines), func(i, j int) { lines[i], lines[j] = lines[j], lines[i] })
				for _, l := range lines {
					indexLine(&info, l[0], l[1], l[2])
				}
			}
			for range rng.IntN(5) {
				var p string
				switch k := rng.IntN(4); {
				case k == 0 && len(basePaths) > 0:
					p = basePaths[rng.IntN(len(basePaths))]
				case k == 1 && len(basePaths) > 0:
					p = basePaths[rng.IntN(len(basePaths))]
					if i := strings.LastIndexByte(p, '/'); i >= 0 {
						p = p[:i]
					} else {
						p += "/" + randomNames[rng.IntN(len(randomNames))]
					}
				default:
					p = randomPath(rng)
				}
				if rng.IntN(3) == 0 {
					oid := strings.Repeat("0", hexLen)
					if rng.IntN(4) == 0 {
						oid = blobs[0]
					}
					indexLine(&info, "0", oid, p)
				} else {
					m := modes[rng.IntN(4)]
					indexLine(&info, m, oidFor(rng, m), p)
				}
			}
			for _, whole := range []bool{false, true} {
				var from *baseTree
				if whole {
					from = bt
				}
				ours, theirs := filepath.Join(dir, "ours.index"), filepath.Join(dir, "theirs.index")
				os.Remove(ours)
				os.Remove(theirs)
				ok, err := writeIndex(ours, format, from, info.Bytes())
				if err != nil {
					t.Fatal(err)
				}
				if !ok {
					refused++
					continue
				}
				written++
				if whole {
					cs, _ := parseIndexLines(info.Bytes(), hexLen)
					for _, c := range cs {
						if c.mode != 0 && bt.dirs[c.path] {
							replacedDir++
						}
						if c.mode != 0 && strings.Contains(c.path, "/") {
							if _, ok := bt.entries[c.path[:strings.LastIndexByte(c.path, '/')]]; ok {
								replacedFile++
							}
						}
						if len(basePaths) > 0 && (c.path < basePaths[0] || c.path > basePaths[len(basePaths)-1]) {
							firstLast++
						}
					}
				}
				if whole {
					os.WriteFile(theirs, baseIdx, 0o600)
				}
				_, errb, err := gitOut(repo, theirs, info.Bytes(), "update-index", "-z", "--index-info")
				if err != nil {
					t.Errorf("git refuses what writeIndex wrote (whole %v): %v %s\nlines %q\nbase %v", whole, err, errb, info.Bytes(), basePaths)
					continue
				}
				for _, args := range [][]string{
					{"ls-files", "--stage", "-z"},
					{"diff", "--cached", "-z", "--raw", "--patch", "--binary", "--no-renames", "--full-index", commit},
				} {
					want, _, err1 := gitOut(repo, theirs, nil, args...)
					got, gerr, err2 := gitOut(repo, ours, nil, args...)
					if err1 != nil || err2 != nil || !bytes.Equal(got, want) {
						t.Errorf("(whole %v) git %s differs: %v %v %s\nlines %q\nbase %v\nours %q\ngit's %q", whole, args[0], err1, err2, gerr, info.Bytes(), basePaths, got, want)
					}
				}
			}
		}
	}
	t.Logf("%s: written %d, left to git %d; dir->file %d, file->dir %d, outside base's range %d", fmtName, written, refused, replacedDir, replacedFile, firstLast)
}

// TestEncodedBaseShared: encoded and sorted under concurrent
// writeIndex calls (renderWhole's parts), run with -race.
func TestEncodedBaseShared(t *testing.T) {
	entries := map[string]baseEntry{}
	for i := range 2000 {
		entries[fmt.Sprintf("d%02d/f%04d", i%37, i)] = baseEntry{"100644", fmt.Sprintf("%040x", i)}
	}
	bt := newBaseTree(entries)
	dir := t.TempDir()
	var wg sync.WaitGroup
	outs := make([][]byte, 4)
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var info bytes.Buffer
			indexLine(&info, "100644", strings.Repeat("ab", 20), fmt.Sprintf("d%02d/new", i))
			f := filepath.Join(dir, fmt.Sprint(i))
			if ok, err := writeIndex(f, formatSHA1, bt, info.Bytes()); !ok || err != nil {
				t.Error(ok, err)
			}
			outs[i], _ = os.ReadFile(f)
		}()
	}
	wg.Wait()
	// A format that differs after the first: left to git, not misencoded.
	var info bytes.Buffer
	indexLine(&info, "100644", strings.Repeat("ab", 32), "x")
	if ok, _ := writeIndex(filepath.Join(dir, "s"), formatSHA256, bt, info.Bytes()); ok {
		t.Error("a base encoded for sha1 written into a sha256 index")
	}
}
