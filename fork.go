package paddock

import (
	"slices"
	"sort"
)

// ForkRequest asks for runs stacked on a run's current files (POST
// /v1/runs/{id}/fork).
type ForkRequest struct {
	// Count is how many runs to make; 1 if 0, at most MaxFork.
	Count int `json:"count,omitempty"`
	// At forks the run as it was when an earlier fork froze it: a layer
	// of its stack (a run.forked event's layer), not its files now.
	At string `json:"at,omitempty"`
}

// MaxFork bounds ForkRequest.Count.
const MaxFork = 32

// ForkResult is a fork's outcome: the run forked, going on over the
// frozen layer, and the runs made on it.
type ForkResult struct {
	Run   *Run   `json:"run"`
	Layer string `json:"layer"` // the frozen layer's id
	Runs  []*Run `json:"runs"`
}

// Comparison is where sibling runs (one project, one base) differ: per
// path any of them changes, which change it and to what.
type Comparison struct {
	BaseRevision string            `json:"base_revision"`
	Runs         []string          `json:"runs"`
	Paths        []ComparedPath    `json:"paths"`
	Hashes       map[string]string `json:"hashes"` // each run's change set hash
}

// ComparedPath is one path of a Comparison.
type ComparedPath struct {
	Path string `json:"path"`
	// Changes are the runs that change the path, in the order asked,
	// each with its op and resulting blob and mode (none if deleted).
	Changes []PathChange `json:"changes"`
	// Unchanged are the runs that leave it as the base has it.
	Unchanged []string `json:"unchanged,omitempty"`
	// Same says every run given ends with the same content there (all
	// change it alike); otherwise they differ.
	Same bool `json:"same"`
}

// PathChange is one run's change of a compared path.
type PathChange struct {
	Run     string   `json:"run"`
	Op      ChangeOp `json:"op"`
	NewBlob string   `json:"new_blob,omitempty"`
	NewMode string   `json:"new_mode,omitempty"`
}

// Compare compares the change sets of sibling runs (in the order given):
// for each path any of them changes, which runs change it, and whether
// every run ends with the same bytes there. Change sets of different bases
// are not comparable.
func Compare(sets []*ChangeSet) (*Comparison, error) {
	if len(sets) < 2 {
		return nil, Errorf(CodeBadRequest, "compare needs two runs or more")
	}
	c := &Comparison{BaseRevision: sets[0].BaseRevision, Hashes: map[string]string{}}
	byPath := map[string]map[string]ChangeEntry{}
	for _, cs := range sets {
		if cs.BaseRevision != c.BaseRevision {
			return nil, Errorf(CodeConflict, "run %s is at base %.12s, run %s at %.12s: only runs at one base compare", sets[0].RunID, c.BaseRevision, cs.RunID, cs.BaseRevision)
		}
		if slices.Contains(c.Runs, cs.RunID) {
			return nil, Errorf(CodeBadRequest, "run %s is given twice", cs.RunID)
		}
		c.Runs = append(c.Runs, cs.RunID)
		c.Hashes[cs.RunID] = cs.Hash
		for _, e := range cs.Entries {
			if byPath[e.Path] == nil {
				byPath[e.Path] = map[string]ChangeEntry{}
			}
			byPath[e.Path][cs.RunID] = e
		}
	}
	paths := make([]string, 0, len(byPath))
	for p := range byPath {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		cp := ComparedPath{Path: p, Same: true}
		var first *PathChange
		for _, id := range c.Runs {
			e, ok := byPath[p][id]
			if !ok {
				cp.Unchanged = append(cp.Unchanged, id)
				cp.Same = false
				continue
			}
			pc := PathChange{Run: id, Op: e.Op, NewBlob: e.NewBlob, NewMode: e.NewMode}
			if e.Op == OpDelete {
				pc.NewBlob, pc.NewMode = "", ""
			}
			if first == nil {
				first = &pc
			} else if pc.NewBlob != first.NewBlob || pc.NewMode != first.NewMode {
				cp.Same = false
			}
			cp.Changes = append(cp.Changes, pc)
		}
		c.Paths = append(c.Paths, cp)
	}
	return c, nil
}
