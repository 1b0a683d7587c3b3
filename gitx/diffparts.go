package gitx

// A diff of many changes rendered on several git processes at once.
//
// git renders a diff on one processor. A diff against base's whole index
// (many changes: see fullIndexPaths) is cut, by path, into parts that are
// each staged in an index of base's own and rendered by a git of its own,
// side by side; git writes a diff's files in path order, one after the
// other, and each file's part alone, so the parts' entries one after the
// other, and then their patches, are the one git's answer, byte for byte
// (TestDiffPartsAreOneDiff).

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/paddock-dev/paddock"
)

// partChanges is the fewest changes a part of a diff is given: a part
// costs a git process more to stage and to render.
var partChanges = 256

// testHookParts, set by a test, is told how many parts a diff was cut into.
var testHookParts func(n int)

// diffParts is how many parts a diff of n changes is cut into (at most):
// one a processor but the one a change set's Watch (changeset) keeps busy
// labelling and masking while git writes. Each part's git reads an index
// of base's whole, and each was given its changes by a git of its own
// when this was measured: on two processors two parts cost more than
// they spared git's render (BenchmarkChangeSet, a clone's 1,000 files:
// 97.8 ms rendered in two parts, 92.5 in one).
var diffParts = func(n int) int {
	return max(1, min(runtime.GOMAXPROCS(0)-1, 4, n/partChanges))
}

// cutParts cuts the index entries info ("MODE OID\tPATH" NUL each,
// removals first) into at most n parts by path: every path of a part
// sorts before every path of the next, and no path of a part is a
// directory above a path of a later one, so that each part, staged alone
// in base's index, holds no file where another holds a directory. Each
// part keeps info's order. Fewer parts come back where the paths cannot
// be cut so; one, info itself, for n < 2.
func cutParts(info []byte, n int) [][]byte {
	if n < 2 {
		return [][]byte{info}
	}
	var recs [][]byte
	for rest := info; len(rest) > 0; {
		i := bytes.IndexByte(rest, 0)
		if i < 0 {
			return [][]byte{info} // not index entries: left whole
		}
		recs, rest = append(recs, rest[:i+1]), rest[i+1:]
	}
	pathOf := func(rec []byte) string {
		_, p, _ := bytes.Cut(rec[:len(rec)-1], []byte{'\t'})
		return string(p)
	}
	paths := make([]string, len(recs))
	for i, r := range recs {
		paths[i] = pathOf(r)
	}
	slices.Sort(paths)
	// A cut before paths[m] is bad when a path before it is a directory
	// above paths[m] or one after: the paths below a directory x are one
	// run of sorted paths (those from x+"/" to x+"0"), so each path blocks
	// the cuts from just after it to the end of its run.
	block := make([]int, len(paths)+1)
	for i, x := range paths {
		lo, _ := slices.BinarySearch(paths[i+1:], x+"/")
		hi, _ := slices.BinarySearch(paths[i+1:], x+"0")
		if lo < hi { // paths[i+1+lo : i+1+hi] lie below x
			block[i+1]++
			block[i+1+hi]--
		}
	}
	var cuts []string // each part's first path, after the first part
	blocked, next := 0, 1
	for k := 0; k < len(paths) && next < n; k++ {
		blocked += block[k]
		if k > 0 && blocked == 0 && k >= len(paths)*next/n && paths[k] != paths[k-1] {
			cuts = append(cuts, paths[k])
			next++
		}
	}
	if len(cuts) == 0 {
		return [][]byte{info}
	}
	parts := make([][]byte, len(cuts)+1)
	for _, r := range recs {
		p := pathOf(r)
		i, _ := slices.BinarySearch(cuts, p)
		if i < len(cuts) && cuts[i] == p {
			i++
		}
		parts[i] = append(parts[i], r...)
	}
	return parts
}

// renderWhole stages s's changes in base's whole index and renders them
// against base: in parts on gits side by side where they are many (see
// cutParts), or in one.
func (d *diffRun) renderWhole(base, cache string, s *staged, o DiffOptions, files []*wfile, verify func(raw []byte) error) (*Snapshot, error) {
	full, err := d.baseTree(base, cache)
	if err != nil {
		return nil, err
	}
	// base's index as git makes it, for what git stages (stageIndex).
	baseOf := sync.OnceValues(func() ([]byte, error) {
		made := filepath.Join(d.tmp, "index.base")
		if err := d.baseIndexAt(made, base, cache); err != nil {
			return nil, err
		}
		b, err := os.ReadFile(made)
		if err != nil {
			return nil, fmt.Errorf("gitx: diff: %w", err)
		}
		return b, nil
	})
	parts := cutParts(s.info.Bytes(), diffParts(len(s.present)+len(s.gone)))
	if len(parts) == 1 {
		if err := d.stageIndex(d.indexFile(), full, parts[0], baseOf); err != nil {
			return nil, err
		}
		return d.render(base, nil, o, files, s.withheld, verify)
	}
	indexes := make([]string, len(parts))
	errs := make([]error, len(parts))
	var wg sync.WaitGroup
	for i, info := range parts {
		indexes[i] = fmt.Sprint(d.indexFile(), ".", i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = d.stageIndex(indexes[i], full, info, baseOf)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		var pe *paddock.Error
		if errors.As(err, &pe) {
			return nil, pe
		}
		return nil, err
	}
	if testHookParts != nil {
		testHookParts(len(parts))
	}
	return d.renderParts(base, indexes, cmp.Or(cache, os.TempDir()), o, files, s.withheld, verify)
}

// indexFile is the scratch index's file.
func (d *diffRun) indexFile() string { return filepath.Join(d.tmp, "index") }

// extraFor is the scratch repository's environment with index as its index.
func (d *diffRun) extraFor(index string) []string {
	extra := slices.Clone(d.extra)
	for i, e := range extra {
		if strings.HasPrefix(e, "GIT_INDEX_FILE=") {
			extra[i] = "GIT_INDEX_FILE=" + index
		}
	}
	return extra
}

// renderParts is render of the indexes' diffs against base, one git each,
// side by side: their entries, one after the other, are read and checked
// first, as render checks one diff's; then the first one's patch streams
// to the caller while the others' go to files in spool (the diff's
// cache, paddock's own, or the system's temporary directory; each file
// 0600 and removed), which follow it in turn.
func (d *diffRun) renderParts(base string, indexes []string, spool string, o DiffOptions, files []*wfile, withheld []Withheld, verify func(raw []byte) error) (*Snapshot, error) {
	snap := &Snapshot{Withheld: withheld}
	patch, buf := o.patch()
	args := diffArgs(base, nil)
	ctx, cancel := context.WithCancel(d.ctx)
	defer cancel()
	raws := make([]chan []byte, len(indexes))
	proceed := make(chan struct{})
	spooled := make([]*os.File, len(indexes))
	defer func() {
		for _, f := range spooled {
			if f != nil {
				f.Close()
				os.Remove(f.Name())
			}
		}
	}()
	for i := range spooled[1:] {
		f, err := os.CreateTemp(spool, "diff-part-")
		if err != nil {
			return nil, fmt.Errorf("gitx: diff: %w", err)
		}
		spooled[i+1] = f
	}
	var first error // the first part's to fail, the others' cancelled after it
	var once sync.Once
	var wg sync.WaitGroup
	for i, index := range indexes {
		raws[i] = make(chan []byte, 1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := d.g.stream(ctx, d.at, d.extraFor(index), args, func(out *bufio.Reader) error {
				raw, err := readRaw(out)
				if err != nil {
					return err
				}
				raws[i] <- raw
				select {
				case <-proceed:
				case <-ctx.Done():
					return ctx.Err()
				}
				var to io.Writer = patch
				if i > 0 {
					to = spooled[i]
				}
				_, err = io.Copy(to, out)
				return err
			})
			if err != nil {
				once.Do(func() { first = err })
				cancel() // the others need not finish
			}
		}()
	}
	failed := func() error {
		wg.Wait()
		if err := d.ctx.Err(); err != nil {
			return fmt.Errorf("gitx: diff: %w", err)
		}
		var pe *paddock.Error
		if errors.As(first, &pe) {
			return first // as render gives it: a timeout, a limit
		}
		if first != nil {
			return fmt.Errorf("gitx: diff: %w", first)
		}
		return nil
	}
	// The entries, in order; a part that failed before its entries ends it.
	for i := range indexes {
		select {
		case raw := <-raws[i]:
			snap.Raw = append(snap.Raw, raw...)
		case <-ctx.Done():
			return nil, failed()
		}
	}
	err := inPathOrder(snap.Raw)
	if err == nil {
		err = verify(snap.Raw)
	}
	if err == nil && o.Check != nil {
		err = o.Check(snap.Raw, withheld, sizeOf(files))
	}
	if err != nil {
		cancel()
		failed()
		var pe *paddock.Error
		if errors.As(err, &pe) {
			return nil, err
		}
		return nil, fmt.Errorf("gitx: diff: %w", err)
	}
	close(proceed)
	if err := failed(); err != nil {
		return nil, err
	}
	for _, f := range spooled[1:] {
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return nil, fmt.Errorf("gitx: diff: %w", err)
		}
		if _, err := io.Copy(patch, f); err != nil {
			return nil, fmt.Errorf("gitx: diff: %w", err)
		}
	}
	snap.Diff = buf.Bytes()
	return snap, nil
}

// inPathOrder checks that the parts' entries, one after the other, are in
// path order, as one git's are: a part whose git removed a path it was
// not given (update-index replaces a file with a directory it is given
// below it) would report it out of the others' order.
func inPathOrder(raw []byte) error {
	fields := bytes.Split(raw, []byte{0})
	var last []byte
	for i := 1; i < len(fields); i += 2 {
		if last != nil && bytes.Compare(fields[i], last) <= 0 {
			return fmt.Errorf("gitx: diff: the parts' entries are out of order at %q", fields[i])
		}
		last = fields[i]
	}
	return nil
}
