package apply

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"sort"
	"strings"

	"github.com/paddock-dev/paddock"
	"golang.org/x/sys/unix"
)

// How an apply into a working tree, an undo and the rollback of a failed
// apply put a list of steps in place. Each step takes one path from an old
// state (absent, a file with a mode, a link) to a new one. A plan checks
// every step against the tree and decides, before anything is written:
//
//   - where the step's new content is staged (Temp): in the deepest
//     directory above it that is a real directory now and stays one, so
//     that a rename puts it in place and no staged file is ever written
//     through a link or into a directory the apply is about to remove;
//   - which directories must be made for it (Dirs): the missing ones, and
//     one where a link or a file stands that the same plan removes (a link
//     or a file that becomes a directory);
//   - which directories must go for it (Gone): the directory standing where
//     a file or a link is to be, which must hold nothing but what the plan
//     removes.
//
// A directory on the way to a path that is a link (or a file) the plan does
// not remove is a conflict: nothing is ever written through it. The commit
// then runs in four passes — remove files and links, remove directories
// (deepest first), make directories (shallowest first), rename each staged
// content into place — and each operation is safe to repeat, so a journal
// can finish it after kill -9 at any point.

// Step is one path of an apply, of an undo or of a rollback.
type Step struct {
	Path    string           `json:"path"`
	Op      paddock.ChangeOp `json:"op"`
	OldMode string           `json:"old_mode,omitempty"` // "" for absent
	NewMode string           `json:"new_mode,omitempty"` // "" for removed
	OldBlob string           `json:"old_blob,omitempty"`
	NewBlob string           `json:"new_blob,omitempty"`
	// OldPerm and NewPerm are a file's exact permission bits before and
	// after, so that an undo gives back a 0600 file as 0600.
	OldPerm fs.FileMode `json:"old_perm,omitempty"`
	NewPerm fs.FileMode `json:"new_perm,omitempty"`
	// Src is the file in the run's artifacts that holds the new content
	// (a frozen blob, a merge's result, or a backup for an undo).
	Src string `json:"src,omitempty"`
	// Temp is where the new content is staged, then renamed over the path.
	Temp string `json:"temp,omitempty"`
	// Backup holds the old content in the run's artifacts, for undo.
	Backup string `json:"backup,omitempty"`
	// Dirs are the directories made for this step, shallowest first.
	Dirs []string `json:"dirs,omitempty"`
	// Gone are the directories removed for this step, deepest first; each
	// must be empty once the plan's files are removed.
	Gone []string `json:"gone,omitempty"`
	// Prune are directories an apply made, removed by its undo if empty.
	Prune []string `json:"prune,omitempty"`
}

// entryState is what a path of the tree holds now.
type entryState struct {
	mode, blob string // mode "" for absent
	perm       fs.FileMode
	dir        bool  // a directory
	err        error // unreadable (a FIFO, a device, an I/O error)
}

func (t *tree) state(rel string) entryState {
	blob, mode, perm, err := t.read(rel, io.Discard)
	var lp *errLinkInPath
	switch {
	case err == nil:
		return entryState{mode: mode, blob: blob, perm: perm}
	case errors.Is(err, errIsDir):
		return entryState{dir: true}
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, os.ErrNotExist):
		return entryState{}
	case errors.As(err, &lp):
		return entryState{err: err}
	}
	return entryState{err: err}
}

// checkFunc judges a step against what its path holds now (a file, a link,
// or nothing; a directory is the plan's to judge); it returns why the step
// cannot be applied, or "", and may complete the step (permissions, a
// merge's result).
type checkFunc func(js *Step, st entryState) string

// plan checks steps against the tree and fills in their Temp, Dirs and
// Gone (see above); tag names the staged files (.paddock-TAG-RUN-N). It
// returns the conflicts, each "path why"; nothing is written. modes
// receives the permission bits of every directory the plan removes, for
// whoever puts them back.
func (t *tree) plan(steps []Step, tag, id string, modes map[string]fs.FileMode, check checkFunc) []string {
	removed := map[string]bool{} // files and links the plan removes
	for _, js := range steps {
		if js.NewMode == "" {
			removed[js.Path] = true
		}
	}
	var conflicts []string
	gone := map[string]bool{}
	for i := range steps {
		js := &steps[i]
		if _, err := splitPath(js.Path); err != nil {
			conflicts = append(conflicts, fmt.Sprintf("%q is not a path inside the project", js.Path))
			continue
		}
		st := t.state(js.Path)
		var lp *errLinkInPath
		if errors.As(st.err, &lp) {
			switch {
			case removed[lp.Dir]:
				st = entryState{} // behind a link or a file that goes first: nothing there
			case js.NewMode == "" && check == nil:
				continue // a rollback: nothing there to remove, reached without a link
			default:
				conflicts = append(conflicts, js.Path+": "+lp.Error())
				continue
			}
		}
		if st.err != nil {
			conflicts = append(conflicts, js.Path+" cannot be read ("+st.err.Error()+")")
			continue
		}
		if st.dir {
			if js.NewMode == "" {
				conflicts = append(conflicts, js.Path+" is a directory in the working tree")
				continue
			}
			dirs, why := t.emptiedBy(js.Path, removed, modes)
			if why != "" {
				conflicts = append(conflicts, why)
				continue
			}
			js.Gone = dirs
			for _, d := range dirs {
				gone[d] = true
			}
			st = entryState{}
		}
		if check != nil {
			if why := check(js, st); why != "" {
				conflicts = append(conflicts, js.Path+" "+why)
				continue
			}
		}
		if js.NewMode == "" {
			continue
		}
		stable, dirs, why := t.stage(js.Path, removed)
		if why != "" {
			conflicts = append(conflicts, why)
			continue
		}
		js.Dirs = appendNew(js.Dirs, dirs...)
		js.Temp = path.Join(stable, fmt.Sprintf(".paddock-%s-%s-%d", tag, id, i))
	}
	// A path under a directory that goes would be both a file and a
	// directory's content: only a change set made by hand says that.
	for _, js := range steps {
		for d := path.Dir(js.Path); d != "." && js.NewMode != ""; d = path.Dir(d) {
			if gone[d] {
				conflicts = append(conflicts, js.Path+" is under "+d+", which the change set makes a file or a link")
				break
			}
		}
	}
	return conflicts
}

// stage finds where a step's new content at rel is staged: the deepest
// directory above rel that is a real directory now (never through a link),
// and the directories to make below it. One on the way that is a link or a
// file must be one the plan removes.
func (t *tree) stage(rel string, removed map[string]bool) (stable string, dirs []string, why string) {
	parts := strings.Split(rel, "/")
	for k := 1; k < len(parts); k++ {
		d := strings.Join(parts[:k], "/")
		st, err := t.lstat(d)
		switch {
		case err == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR:
			stable = d
			continue
		case errors.Is(err, fs.ErrNotExist):
		case err == nil && removed[d] && (st.Mode&unix.S_IFMT == unix.S_IFLNK || st.Mode&unix.S_IFMT == unix.S_IFREG):
		case err == nil:
			return "", nil, rel + ": " + (&errLinkInPath{Dir: d, What: kindName(uint32(st.Mode))}).Error()
		default:
			return "", nil, rel + " cannot be reached (" + err.Error() + ")"
		}
		for ; k < len(parts); k++ {
			dirs = append(dirs, strings.Join(parts[:k], "/"))
		}
	}
	return stable, dirs, ""
}

func kindName(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFLNK:
		return "a symbolic link"
	case unix.S_IFREG:
		return "a file"
	}
	return "not a directory"
}

// emptiedBy lists the directory rel and every directory under it, deepest
// first, if the plan's removals leave them all empty; otherwise it says
// what stands in the way. modes receives their permission bits.
func (t *tree) emptiedBy(rel string, removed map[string]bool, modes map[string]fs.FileMode) ([]string, string) {
	names, err := t.readDir(rel)
	if err != nil {
		return nil, rel + " cannot be read (" + err.Error() + ")"
	}
	sort.Strings(names)
	var out []string
	for _, n := range names {
		p := rel + "/" + n
		st, err := t.lstat(p)
		if err != nil {
			return nil, p + " cannot be read (" + err.Error() + ")"
		}
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			sub, why := t.emptiedBy(p, removed, modes)
			if why != "" {
				return nil, why
			}
			out = append(out, sub...)
			continue
		}
		if !removed[p] {
			return nil, rel + " is a directory in the working tree holding " + p + ", which the change set does not remove"
		}
	}
	st, err := t.lstat(rel)
	if err != nil {
		return nil, rel + " cannot be read (" + err.Error() + ")"
	}
	modes[rel] = fs.FileMode(st.Mode & 0o7777)
	return append(out, rel), ""
}

func appendNew(xs []string, ys ...string) []string {
	for _, y := range ys {
		if !slices.Contains(xs, y) {
			xs = append(xs, y)
		}
	}
	return xs
}

// stageAll writes every step's new content to its Temp, not yet synced
// (the caller makes them durable together). after runs after each one.
func (t *tree) stageAll(steps []Step, after func()) error {
	for _, js := range steps {
		if js.Temp == "" {
			continue
		}
		if err := t.stageOne(js); err != nil {
			return fmt.Errorf("%s: %w", js.Path, err)
		}
		after()
	}
	return nil
}

// stageOne writes a step's new content, streamed from its Src, to its
// Temp with its exact permissions; a symbolic link is made as a link.
func (t *tree) stageOne(js Step) error {
	in, err := os.Open(js.Src)
	if err != nil {
		return err
	}
	defer in.Close()
	t.remove(js.Temp) // a leftover of an earlier, interrupted attempt
	if js.NewMode == "120000" {
		target, err := io.ReadAll(io.LimitReader(in, 1<<16))
		if err != nil {
			return err
		}
		return t.symlink(string(target), js.Temp)
	}
	perm := js.NewPerm
	if perm == 0 {
		perm = fileMode(js.NewMode)
	}
	f, err := t.create(js.Temp, perm)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, in)
	return errors.Join(err, f.Close())
}

// unstage removes the staged contents of steps.
func (t *tree) unstage(steps []Step) {
	for _, js := range steps {
		if js.Temp != "" {
			t.remove(js.Temp)
		}
	}
}

// commit puts the steps in place, in the four passes described above.
// Every operation is safe to repeat; after runs after each one.
func (t *tree) commit(steps []Step, modes map[string]fs.FileMode, after func()) error {
	for _, js := range steps {
		if js.NewMode == "" {
			if err := t.remove(js.Path); err != nil {
				return fmt.Errorf("removing %s: %w", js.Path, err)
			}
			after()
		}
	}
	type dir struct {
		path   string
		strict bool
	}
	var rm []dir
	seen := map[string]bool{}
	for _, js := range steps {
		for _, d := range js.Gone {
			if !seen[d] {
				seen[d] = true
				rm = append(rm, dir{d, true})
			}
		}
	}
	for _, js := range steps {
		for _, d := range js.Prune {
			if !seen[d] {
				seen[d] = true
				rm = append(rm, dir{d, false})
			}
		}
	}
	sort.SliceStable(rm, func(a, b int) bool { return depth(rm[a].path) > depth(rm[b].path) })
	for _, d := range rm {
		if err := t.rmdir(d.path); err != nil && d.strict {
			return fmt.Errorf("removing the directory %s: %w", d.path, err)
		}
		after()
	}
	var mk []string
	for _, js := range steps {
		mk = appendNew(mk, js.Dirs...)
	}
	sort.SliceStable(mk, func(a, b int) bool { return depth(mk[a]) < depth(mk[b]) })
	for _, d := range mk {
		perm, ok := modes[d]
		if !ok {
			perm = 0o755
		}
		if err := t.mkdir(d, perm); err != nil {
			return fmt.Errorf("making the directory %s: %w", d, err)
		}
		after()
	}
	for _, js := range steps {
		if js.Temp == "" {
			continue
		}
		if _, err := t.lstat(js.Temp); errors.Is(err, fs.ErrNotExist) {
			continue // renamed already
		}
		if err := t.rename(js.Temp, js.Path); err != nil {
			return fmt.Errorf("putting %s in place: %w", js.Path, err)
		}
		after()
	}
	return nil
}

func depth(p string) int { return strings.Count(p, "/") }

// verify checks that the tree holds what the steps put there: each path
// reached without a link, of the new type, mode and permissions, its
// content hashing to the new blob id; each removed path gone (or a
// directory the plan made). It returns the mismatches.
func (t *tree) verify(steps []Step) []string {
	made := map[string]bool{}
	for _, js := range steps {
		for _, d := range js.Dirs {
			made[d] = true
		}
	}
	var bad []string
	for _, js := range steps {
		st := t.state(js.Path)
		var lp *errLinkInPath
		if js.NewMode == "" {
			switch {
			case errors.As(st.err, &lp):
				// Under a file or a link now: it cannot exist.
			case st.err != nil:
				bad = append(bad, js.Path+" cannot be read ("+st.err.Error()+")")
			case st.dir && made[js.Path]:
			case st.dir || st.mode != "":
				bad = append(bad, js.Path+" is still there")
			}
			continue
		}
		switch {
		case st.err != nil:
			bad = append(bad, js.Path+" cannot be read ("+st.err.Error()+")")
		case st.dir:
			bad = append(bad, js.Path+" is a directory")
		case st.mode != js.NewMode:
			bad = append(bad, fmt.Sprintf("%s has mode %s, not %s", js.Path, orNone(st.mode), js.NewMode))
		case st.blob != js.NewBlob:
			bad = append(bad, fmt.Sprintf("%s holds blob %s, not %s", js.Path, st.blob, js.NewBlob))
		case js.NewMode != "120000" && js.NewPerm != 0 && st.perm != js.NewPerm:
			bad = append(bad, fmt.Sprintf("%s has permissions %v, not %v", js.Path, st.perm, js.NewPerm))
		}
	}
	return bad
}

func orNone(mode string) string {
	if mode == "" {
		return "none (missing)"
	}
	return mode
}

// inverse is the plan that takes the tree back from after steps to before
// them, from their backups: what they created is removed, what they removed
// or changed comes back with its old content and permissions, the
// directories they removed are made again, and the ones they made go when
// empty.
func inverse(steps []Step) []Step {
	out := make([]Step, 0, len(steps))
	for _, js := range steps {
		u := Step{Path: js.Path, OldMode: js.NewMode, NewMode: js.OldMode, OldBlob: js.NewBlob, NewBlob: js.OldBlob,
			OldPerm: js.NewPerm, NewPerm: js.OldPerm, Src: js.Backup, Prune: reversed(js.Dirs), Dirs: reversed(js.Gone)}
		switch {
		case js.OldMode == "":
			u.Op = paddock.OpDelete
		case js.NewMode == "":
			u.Op = paddock.OpCreate
		default:
			u.Op = paddock.OpModify
		}
		out = append(out, u)
	}
	return out
}

func reversed(xs []string) []string {
	if len(xs) == 0 {
		return nil
	}
	out := make([]string, len(xs))
	for i, x := range xs {
		out[len(xs)-1-i] = x
	}
	return out
}
