package lifecycle

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/changeset"
	"github.com/paddock-dev/paddock/gitx"
	"github.com/paddock-dev/paddock/internal/durable"
)

// Nodes is this daemon's part in a cluster of nodes sharing the store: checkpoints kept for adoption, adoption of a lost node's runs, and fingerprints.
type Nodes struct {
	*kernel
	// the services it calls
	changes *Changes
	jobs    *Jobs
	runs    *Runs
	views   *views

	checkpointsDue sync.Map   // run id → true while a checkpoint in the shared store is due
	checkpointKept sync.Map   // run id → the key of the checkpoint this node stored last
	checkpointMu   runLocks   // one store of a run's checkpoint at a time, so that the one stored last is the newest
	adoptCalls     sync.Map   // run id → a token of its own while an Adopt of it runs on this node
	adopting       sync.Map   // run id → true while this node restores it (its checkpoints wait)
	fingerprintMu  sync.Mutex // one write of this node's project fingerprints at a time
	life           *lifetime  // the checkpoints due
}

// A run's checkpoint in the shared store (Config.Cluster) is a tar:
// manifest.json first (the base, the change set's hash, each entry with
// its path as bytes, and whether the run's bootstrap record follows),
// then each added or modified file's content as f/N (N its entry's index
// in the manifest), and bootstrap.json.
type clusterManifest struct {
	BaseRevision string          `json:"base_revision"`
	Hash         string          `json:"hash"`
	Entries      []clusterEntry  `json:"entries"`
	Bootstrap    bool            `json:"bootstrap,omitempty"`
	Skipped      []clusterSkip   `json:"skipped,omitempty"`
	Extra        json.RawMessage `json:"extra,omitempty"`
}

type clusterEntry struct {
	Path    []byte `json:"path"` // bytes: a name need not be UTF-8
	Deleted bool   `json:"deleted,omitempty"`
	Mode    string `json:"mode,omitempty"` // 100644 or 100755
}

// clusterSkip is an entry of the change set the checkpoint does not carry,
// and why: what an adoption could not restore says so.
type clusterSkip struct {
	Path   []byte `json:"path"`
	Reason string `json:"reason"`
}

// storeCheckpoint stores run id's change set as its checkpoint in the
// shared store, when there is one; a failure is logged and recorded, and
// changes nothing else (the run goes on; an adoption would restore from
// the last checkpoint that was stored).
func (nd *Nodes) storeCheckpoint(ctx context.Context, id, why string) {
	nd.storeCheckpointOf(ctx, id, why, nil)
}

// storeCheckpointOf is storeCheckpoint with the run's change set known
// already (cs; nil: computed here): a run just made has an empty one.
// forget drops what this node knows of run id's stored checkpoint
// (forgetRun).
func (nd *Nodes) forget(id string) { nd.checkpointKept.Delete(id) }

func (nd *Nodes) storeCheckpointOf(ctx context.Context, id, why string, cs *paddock.ChangeSet) {
	if nd.Cluster == nil {
		return
	}
	if _, adopting := nd.adopting.Load(id); adopting {
		return // its files are being restored: the stored checkpoint is the good one
	}
	defer nd.checkpointMu.lock(id)()
	ctx = context.WithoutCancel(ctx)
	r, err := nd.Run(ctx, id)
	if storeAway(err) {
		nd.checkpointSoon(id) // due still: tried again once the store may be back
		return
	}
	if err != nil || r.Workspace == nil || r.Access != paddock.AccessWrite || !nd.mine(r) {
		nd.checkpointKept.Delete(id)
		return // a read run changes nothing to carry; another node's is its own
	}
	switch r.Workspace.State {
	case paddock.StateReady, paddock.StateActive, paddock.StateCheckpointed:
	default:
		nd.checkpointKept.Delete(id) // no live workspace: nothing more to store
		return
	}
	cp, err := nd.clusterCheckpoint(ctx, r, cs)
	if errors.Is(err, errUnchanged) {
		return // the one stored holds the same: not written again
	}
	if err == nil {
		err = nd.Cluster.SaveCheckpoint(ctx, cp.RunCheckpoint)
	}
	if err != nil {
		nd.log().Warn("cannot store the run's checkpoint in the shared store", "run", id, "why", why, "err", err)
		if storeAway(err) {
			nd.checkpointSoon(id)
		}
		if err := nd.record(ctx, id, paddock.EventClusterCheckpoint, map[string]any{"why": why, "stored": false, "error": paddock.ErrorMessage(err)}); err != nil {
			nd.log().Warn("cannot record the checkpoint's failure", "run", id, "err", err)
		}
		return
	}
	nd.checkpointKept.Store(id, cp.key)
	if err := nd.record(ctx, id, paddock.EventClusterCheckpoint, map[string]any{"why": why, "stored": true, "hash": cp.Hash, "entries": cp.Entries,
		"bytes": len(cp.Content), "left_out": cp.leftOut}); err != nil {
		nd.log().Warn("cannot record the stored checkpoint", "run", id, "err", err)
	}
}

// storeAway says whether err is the shared store out of reach for now
// (down, restarting, this node's lease clock run out while it is), not an
// answer of its: what can wait is tried again. A node that lost its lease
// for good (fenced) stops instead.
func storeAway(err error) bool {
	return errors.Is(err, paddock.ErrStoreUnreachable) || paddock.IsCode(err, paddock.CodeNodeLost) && !errors.Is(err, paddock.ErrFenced)
}

// errUnchanged is clusterCheckpoint's answer when the checkpoint this node
// stored last for the run holds the same change set and records.
var errUnchanged = errors.New("lifecycle: the stored checkpoint is unchanged")

// checkpointMax bounds the files a checkpoint carries: what is past it is
// left out, and named (the shared store's database, and its write-ahead
// log, take every checkpoint whole).
var checkpointMax int64 = 64 << 20

// packedCheckpoint is a checkpoint with what this node keeps of it: the
// key that says it is unchanged, and what it left out.
type packedCheckpoint struct {
	*paddock.RunCheckpoint
	key     string
	leftOut []string
}

// checkpointDelay is how soon after a call that changed a run's files its
// checkpoint is stored (with nodes): once for all the calls meanwhile, so
// that an adoption loses at most about this much of a run's work. (An
// atomic: a test sets it while an earlier test's delayed store may still
// read it.)
var checkpointDelay atomic.Int64

func init() { checkpointDelay.Store(int64(3 * time.Second)) }

// checkpointSoon stores run id's checkpoint within checkpointDelay, unless
// one is due already.
func (nd *Nodes) checkpointSoon(id string) {
	if nd.Cluster == nil {
		return
	}
	if _, adopting := nd.adopting.Load(id); adopting {
		return
	}
	if _, due := nd.checkpointsDue.LoadOrStore(id, true); due {
		return
	}
	nd.life.goBackground(func() {
		t := time.NewTimer(time.Duration(checkpointDelay.Load()))
		defer t.Stop()
		select {
		case <-nd.life.ctx.Done():
			nd.checkpointsDue.Delete(id)
			return // the shutdown's checkpoints store it
		case <-t.C:
		}
		// Not due any more as the store begins: a change during it is
		// stored by a store of its own.
		nd.checkpointsDue.Delete(id)
		nd.storeCheckpoint(nd.life.ctx, id, "files changed")
	})
}

// clusterCheckpoint packs run r's change set (cs, or computed if nil) as a
// checkpoint, or answers errUnchanged.
func (nd *Nodes) clusterCheckpoint(ctx context.Context, r *paddock.Run, cs *paddock.ChangeSet) (*packedCheckpoint, error) {
	id := r.ID
	var err error
	if cs == nil {
		if cs, err = nd.changes.ChangeSet(ctx, id); err != nil {
			return nil, err
		}
	} else if cs.Hash == "" {
		if cs.Hash, err = changeset.Hash(cs); err != nil {
			return nil, internal("hashing a change set failed", err)
		}
	}
	boot, err := os.ReadFile(filepath.Join(nd.runDir(id), "bootstrap.json"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, internal("reading the run's bootstrap record failed", err)
	}
	hasBoot := err == nil
	key := fmt.Sprintf("%s %t %x", cs.Hash, hasBoot, sha256.Sum256(boot))
	if k, ok := nd.checkpointKept.Load(id); ok && k == key {
		return nil, errUnchanged
	}
	// The workspace is opened once there is a file to read: an overlay's
	// view is reached through the run's harness, which a run with nothing
	// to carry does not need started.
	var root *os.Root
	defer func() {
		if root != nil {
			root.Close()
		}
	}()
	open := func() (*os.Root, error) {
		if root != nil {
			return root, nil
		}
		dir, err := nd.views.viewDir(ctx, r, nil)
		if err != nil {
			return nil, err
		}
		if root, err = os.OpenRoot(dir); err != nil {
			return nil, internal("opening the workspace for a checkpoint failed", err)
		}
		return root, nil
	}
	man := clusterManifest{BaseRevision: cs.BaseRevision, Hash: cs.Hash, Bootstrap: hasBoot}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	add := func(name string, b []byte) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o600, Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		_, err := tw.Write(b)
		return err
	}
	var total int64
	var files [][]byte
	for _, e := range cs.Entries {
		switch {
		case e.Blocked != "":
			man.Skipped = append(man.Skipped, clusterSkip{[]byte(e.Path), "never applied: " + e.Blocked})
			continue
		case e.Op == paddock.OpDelete:
			man.Entries = append(man.Entries, clusterEntry{Path: []byte(e.Path), Deleted: true})
			files = append(files, nil)
			continue
		case e.NewMode != "100644" && e.NewMode != "100755":
			man.Skipped = append(man.Skipped, clusterSkip{[]byte(e.Path), "a symbolic link or a submodule (mode " + e.NewMode + "): only files travel"})
			continue
		case total+e.Size > checkpointMax:
			man.Skipped = append(man.Skipped, clusterSkip{[]byte(e.Path), fmt.Sprintf("left out: a checkpoint carries at most %d bytes of files", checkpointMax)})
			continue
		}
		rt, err := open()
		if err != nil {
			return nil, err
		}
		b, err := readChecked(rt, e.Path, e.Size)
		if err != nil {
			man.Skipped = append(man.Skipped, clusterSkip{[]byte(e.Path), err.Error()})
			continue
		}
		total += int64(len(b))
		man.Entries = append(man.Entries, clusterEntry{Path: []byte(e.Path), Mode: e.NewMode})
		files = append(files, b)
	}
	mb, _ := json.Marshal(man)
	if err := add("manifest.json", mb); err != nil {
		return nil, internal("packing a checkpoint failed", err)
	}
	for i, b := range files {
		if !man.Entries[i].Deleted {
			if err := add("f/"+strconv.Itoa(i), b); err != nil {
				return nil, internal("packing a checkpoint failed", err)
			}
			files[i] = nil // packed: not held twice
		}
	}
	if hasBoot {
		if err := add("bootstrap.json", boot); err != nil {
			return nil, internal("packing a checkpoint failed", err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, internal("packing a checkpoint failed", err)
	}
	return &packedCheckpoint{RunCheckpoint: &paddock.RunCheckpoint{RunID: id, BaseRevision: cs.BaseRevision, Hash: cs.Hash,
		Entries: len(cs.Entries), TakenAt: now(), Content: buf.Bytes()}, key: key, leftOut: skipped(man.Skipped)}, nil
}

// readChecked reads the regular file at path in root, expecting size
// bytes: a file that is no longer regular (a FIFO would block the read)
// or grew since the change set was read is not carried.
func readChecked(root *os.Root, path string, size int64) ([]byte, error) {
	f, err := root.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, fmt.Errorf("unreadable: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return nil, errors.New("no longer a regular file")
	}
	b, err := io.ReadAll(io.LimitReader(f, size+1))
	if err != nil {
		return nil, fmt.Errorf("unreadable: %w", err)
	}
	if int64(len(b)) != size {
		return nil, errors.New("changed while the checkpoint was packed")
	}
	return b, nil
}

// readCheckpoint unpacks a checkpoint's tar.
func readCheckpoint(content []byte) (*clusterManifest, map[string][]byte, error) {
	tr := tar.NewReader(bytes.NewReader(content))
	files := map[string][]byte{}
	var man *clusterManifest
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, err
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return nil, nil, err
		}
		if h.Name == "manifest.json" {
			man = new(clusterManifest)
			if err := json.Unmarshal(b, man); err != nil {
				return nil, nil, err
			}
			continue
		}
		files[h.Name] = b
	}
	if man == nil {
		return nil, nil, errors.New("no manifest")
	}
	return man, files, nil
}

// Adopt restores, on this node, run id whose node is lost (or stopped),
// from its last checkpoint in the shared store: a workspace at the
// checkpoint's base made here, the checkpoint's files written into it
// through the working tools (the run's protections hold), its bootstrap
// record, and its interrupted job taken over and run again here. What the
// lost node did after the checkpoint is lost with it; what the checkpoint
// did not carry, or could not be written, is in the run.adopted event.
func (nd *Nodes) Adopt(ctx context.Context, id, by string) (*paddock.AdoptResult, error) {
	if nd.Cluster == nil {
		return nil, paddock.Errorf(paddock.CodeUnsupported, "this daemon shares its store with no other node: there is nothing to adopt a run from")
	}
	if err := nd.checkOpen(); err != nil {
		return nil, err
	}
	// One adoption of a run at a time on this node (an automatic one and
	// an operator's, or two calls): a second one, whose take the store
	// refuses, would overwrite the first's adoption marker and then remove
	// it, and its return would end the first's hold on the run's
	// checkpoints. Adoptions of different runs go on at once.
	mine := new(byte) // not zero-sized: two such pointers may be equal
	if _, busy := nd.adoptCalls.LoadOrStore(id, mine); busy {
		return nil, paddock.Errorf(paddock.CodeConflict, "run %s is being adopted by this node (%s) already", id, nd.selfNode())
	}
	defer nd.adoptCalls.CompareAndDelete(id, mine)
	a, err := nd.planAdoption(ctx, id)
	if err != nil {
		return nil, err // a refused adoption holds none of the run's checkpoints back
	}
	// While its files are restored, no checkpoint of the run is stored:
	// the one in the store is what a retry restores from.
	nd.adopting.Store(id, true)
	defer nd.adopting.Delete(id)
	if err := a.take(ctx, by); err != nil {
		return nil, err
	}
	if err := a.restoreWorkspace(ctx); err != nil {
		return nil, a.fail(ctx, err)
	}
	done := context.WithoutCancel(ctx)
	notRestored := a.restoreFiles(done)
	res := &paddock.AdoptResult{FromNode: a.from, Checkpoint: a.cp.Hash, TakenAt: a.cp.TakenAt, Entries: len(a.man.Entries)}
	cs, err := nd.changes.ChangeSet(done, id)
	if err != nil {
		return nil, a.fail(ctx, adoptStep{"reading the restored change set", err})
	}
	data := map[string]any{"checkpoint": a.cp.Hash, "restored": cs.Hash, "same": cs.Hash == a.cp.Hash, "not_restored": notRestored,
		// What stayed on the lost node's disk: its records of the run.
		"not_carried": "the run's job logs and results, its change sets computed before, its provenance journal (diff --blame), its apply journal"}
	a.resubmit(done, cs.Hash, data)
	if a.job != nil {
		if err := nd.adoptJob(done, a.job, a.from); err != nil {
			data["job"], data["job_error"] = a.job.ID, paddock.ErrorMessage(err)
			nd.log().Error("taking over an adopted run's job failed", "run", id, "job", a.job.ID, "err", err)
		} else {
			res.Job = a.job.ID
			data["job"] = a.job.ID
		}
	}
	if err := nd.record(done, id, paddock.EventResumed, map[string]any{"by": by, "adopted": data}); err != nil {
		return nil, err
	}
	if err := os.Remove(nd.adoptionMarkerPath(id)); err != nil {
		nd.log().Warn("cannot remove an adoption's marker", "run", id, "err", err)
	}
	nd.adopting.Delete(id)
	nd.checkpointSoon(id) // the restored files, as this node's first checkpoint of them
	if res.Run, err = nd.Run(done, id); err != nil {
		return nil, err
	}
	return res, nil
}

// adoption is one adoption under way: the run, where it comes from, and
// what restores it.
type adoption struct {
	nd    *Nodes
	id    string
	r     *paddock.Run
	p     *paddock.Project
	orig  paddock.Workspace // what the run goes back to if the adoption fails
	w     *paddock.Workspace
	cp    *paddock.RunCheckpoint
	man   *clusterManifest
	files map[string][]byte
	prov  paddock.WorkspaceProvider
	job   *paddock.Job // the job taken over, if any
	from  string       // the node it was taken from
}

// adoptStep is a step of an adoption that failed, and why.
type adoptStep struct {
	what string
	err  error
}

func (e adoptStep) Error() string { return e.what + ": " + e.err.Error() }
func (e adoptStep) Unwrap() error { return e.err }

// planAdoption checks that run id may be adopted here, and reads what
// restores it: its checkpoint, the base it stands on, its last job.
func (nd *Nodes) planAdoption(ctx context.Context, id string) (*adoption, error) {
	r, p, err := nd.runAndProject(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := nd.adoptable(r); err != nil {
		return nil, err
	}
	a := &adoption{nd: nd, id: id, r: r, p: p}
	a.cp, err = nd.Cluster.LoadCheckpoint(ctx, id)
	if err != nil {
		if paddock.IsCode(err, paddock.CodeNotFound) {
			return nil, paddock.Errorf(paddock.CodeNotFound, "run %s has no checkpoint in the shared store (its node was lost before one was stored): there is nothing to restore it from", id)
		}
		return nil, err
	}
	if a.man, a.files, err = readCheckpoint(a.cp.Content); err != nil {
		return nil, internal("the run's checkpoint does not read", err)
	}
	if a.prov, err = nd.provider(r.Workspace.Kind); err != nil {
		return nil, err
	}
	if _, err := nd.Git.Resolve(ctx, p.Root, a.cp.BaseRevision+"^{commit}"); err != nil {
		return nil, paddock.Errorf(paddock.CodeNotFound, "project %s has no commit %s here, the run's base: this node's copy of the project must have it", p.Name, a.cp.BaseRevision)
	}
	var jobs []*paddock.Job
	if err := nd.Store.View(ctx, func(tx paddock.Tx) (err error) {
		jobs, err = tx.Jobs(ctx, id, "")
		return err
	}); err != nil {
		return nil, err
	}
	// The last job, interrupted when its node was lost, or still running
	// when its node stopped without recording its end (TakeRun interrupts
	// it), is taken over.
	if n := len(jobs); n > 0 && (jobs[n-1].State == paddock.JobInterrupted || jobs[n-1].State == paddock.JobRunning) {
		a.job = jobs[n-1]
	}
	return a, nil
}

// adoptable refuses a run that cannot move here: no workspace, a handed
// directory, not live, here already, or on a node that is alive.
func (nd *Nodes) adoptable(r *paddock.Run) error {
	id := r.ID
	if r.Workspace == nil {
		return paddock.Errorf(paddock.CodeConflict, "run %s has no workspace: there is nothing to restore", id)
	}
	if r.Workspace.Kind == paddock.KindOperatorDir {
		return paddock.Errorf(paddock.CodeUnsupported, "run %s works in a directory the operator handed over on its node; it cannot move", id)
	}
	switch r.Workspace.State {
	case paddock.StateReady, paddock.StateActive, paddock.StateCheckpointed, paddock.StateRequested, paddock.StatePreparing:
	default:
		return paddock.Errorf(paddock.CodeConflict, "run %s is %s: only a live run is adopted", id, r.Workspace.State)
	}
	if r.Node == nd.Cluster.Self().ID {
		return paddock.Errorf(paddock.CodeConflict, "run %s is on this node (%s) already", id, r.Node)
	}
	if r.NodeState == paddock.NodeAlive {
		return paddock.Errorf(paddock.CodeConflict, "run %s is on node %s, which is alive: only a lost or stopped node's runs are adopted", id, r.Node)
	}
	return nil
}

// take moves the run to this node, preparing, with the adoption
// recorded; the marker written first says to a restart that the adoption
// was cut short, and what to give back.
func (a *adoption) take(ctx context.Context, by string) error {
	nd, r, id := a.nd, a.r, a.id
	a.orig = *r.Workspace
	marker := adoptionMarker{From: r.Node, Root: a.orig.Root, State: a.orig.State}
	if err := nd.writeAdoptionMarker(id, marker); err != nil {
		return internal("recording the adoption failed", err)
	}
	w := r.Workspace
	w.Root = filepath.Join(nd.WorkspacesDir, id)
	w.BaseRevision = a.cp.BaseRevision
	w.State, w.Reason, w.UpdatedAt = paddock.StatePreparing, adoptingReason+r.Node, now()
	a.w = w
	from, err := nd.Cluster.TakeRun(ctx, id, func(tx paddock.Tx) error {
		if err := tx.UpdateWorkspace(ctx, w); err != nil {
			return err
		}
		_, err := tx.AppendEvent(ctx, id, paddock.EventAdopted, map[string]any{"from_node": r.Node, "to_node": nd.Cluster.Self().ID,
			"by": by, "checkpoint": a.cp.Hash, "checkpoint_taken_at": a.cp.TakenAt, "entries": len(a.man.Entries), "not_carried": skipped(a.man.Skipped),
			"from_root": a.orig.Root, "from_state": a.orig.State})
		return err
	})
	if err != nil {
		os.Remove(nd.adoptionMarkerPath(id))
		return err
	}
	a.from = from
	nd.notify()
	nd.log().Info("adopting a run", "run", id, "from", from)
	return nil
}

// fail gives the run back to the node it came from, and says which step
// failed (an adoptStep).
func (a *adoption) fail(ctx context.Context, err error) error {
	step := adoptStep{what: "adopting", err: err}
	errors.As(err, &step)
	a.nd.log().Error("adopting a run failed", "run", a.id, "step", step.what, "err", step.err)
	a.nd.giveBack(context.WithoutCancel(ctx), a.r, a.p, a.w, a.orig, a.from, step.what+": "+paddock.ErrorMessage(step.err))
	var pe *paddock.Error
	if errors.As(step.err, &pe) {
		return step.err
	}
	return internal("adopting the run failed ("+step.what+")", step.err)
}

// restoreWorkspace makes the run's workspace at the checkpoint's base and
// its home here, writes its bootstrap record, and records it ready.
func (a *adoption) restoreWorkspace(ctx context.Context) error {
	nd, id, w := a.nd, a.id, a.w
	// A directory at the run's workspace on this node's disk is what is
	// left of an earlier hold of it: this node held the run, was lost and
	// started again while the run was adopted elsewhere. The checkpoint is
	// what the run is now; the leftover is removed, or it would refuse the
	// adoption (mkdir: file exists) on every node the run was ever on.
	// Anything else in the way still fails the adoption.
	if err := a.makeWorkspace(ctx); err != nil {
		return err
	}
	if nd.SandboxUID != 0 {
		if err := chownTree(w.Root, nd.SandboxUID); err != nil {
			return adoptStep{"handing its workspace to the sandbox user", err}
		}
	}
	nd.changes.seed(ctx, a.r, a.p)
	if err := nd.views.prepareAux(a.r); err != nil {
		return adoptStep{"making its home", err}
	}
	if a.man.Bootstrap {
		if err := durable.WriteFile(filepath.Join(nd.runDir(id), "bootstrap.json"), a.files["bootstrap.json"]); err != nil {
			return adoptStep{"writing its bootstrap record", err}
		}
	}
	done := context.WithoutCancel(ctx)
	if err := nd.update(done, func(tx paddock.Tx) error {
		cur, err := tx.Run(done, id)
		if err != nil {
			return err
		}
		return nd.transition(done, tx, cur, paddock.StateReady, "adopted from node "+a.from)
	}); err != nil {
		return adoptStep{"recording its workspace ready", err}
	}
	return nil
}

// makeWorkspace makes the run's workspace here, removing first what is
// left of it from an earlier hold.
func (a *adoption) makeWorkspace(ctx context.Context) error {
	nd, id, w := a.nd, a.id, a.w
	if fi, err := os.Lstat(w.Root); err == nil && fi.IsDir() {
		nd.log().Info("removing what is left of the run's workspace from an earlier hold of it", "run", id, "root", w.Root)
		if err := a.prov.Remove(ctx, a.p, w); err != nil {
			return adoptStep{"removing what was left of its workspace here", err}
		}
	}
	if err := a.prov.Prepare(nd.runs.progress(ctx, id), a.p, w); err != nil {
		return adoptStep{"preparing its workspace", err}
	}
	return nil
}

// restoreFiles writes the checkpoint's files into the run through the
// working tools (the run's protections hold), and names those it could
// not.
func (a *adoption) restoreFiles(ctx context.Context) []string {
	notRestored := []string{}
	for i, e := range a.man.Entries {
		path := string(e.Path)
		if !utf8.Valid(e.Path) {
			notRestored = append(notRestored, fmt.Sprintf("%q: its name is not UTF-8, which the working tools do not write", path))
			continue
		}
		var content []byte
		if !e.Deleted {
			content = a.files["f/"+strconv.Itoa(i)]
			if content == nil {
				content = []byte{} // an empty file, not a deletion
			}
		}
		if err := a.nd.runs.writeFile(ctx, a.id, path, content, e.Mode == "100755"); err != nil {
			notRestored = append(notRestored, fmt.Sprintf("%q: %s", path, paddock.ErrorMessage(err)))
		}
	}
	return notRestored
}

// resubmit deals with the run's submission, which stayed on the lost
// node's disk: the restored files are submitted again under the same hash
// when they make it (an approval of it is the operator's to give again),
// and named in data when not.
func (a *adoption) resubmit(ctx context.Context, restored string, data map[string]any) {
	sub, applied := a.nd.lastSubmitted(ctx, a.id)
	if sub == "" || applied || sub != restored {
		// A submission record this node kept from an earlier hold of the
		// run is not the run's now: it would answer a stale review, and
		// an apply here would apply its frozen change set.
		if err := a.nd.changes.dropSubmission(a.id); err != nil {
			a.nd.log().Warn("cannot remove an earlier hold's submission record", "run", a.id, "err", err)
		}
	}
	switch {
	case sub == "":
	case applied:
		// Submitting it again would offer what is merged already.
		data["submission_not_carried"] = sub + ": it was applied on node " + a.from + "; its submission record stayed there"
	case sub != restored:
		data["submission_not_carried"] = sub + ": the restored files hash to " + restored + "; submit them again"
	default:
		if _, err := a.nd.changes.Submit(ctx, a.id); err != nil {
			data["submission_not_carried"] = sub + ": submitting it again failed: " + paddock.ErrorMessage(err)
		} else {
			data["resubmitted"] = sub
		}
	}
}

func skipped(s []clusterSkip) []string {
	out := []string{}
	for _, k := range s {
		out = append(out, fmt.Sprintf("%q: %s", k.Path, k.Reason))
	}
	return out
}

// adoptJob takes over job j, interrupted on lost node from, and runs its
// request again here: the same job, its owner this daemon, running again.
func (nd *Nodes) adoptJob(ctx context.Context, j *paddock.Job, from string) error {
	req := paddock.StartJobRequest{Kind: j.Kind}
	if j.Kind == paddock.JobExec {
		req.Exec = new(paddock.ExecRequest)
		if err := json.Unmarshal(j.Request, req.Exec); err != nil {
			return internal("the job's request does not read", err)
		}
	}
	body, _, err := nd.jobs.planJob(ctx, j.RunID, req)
	if err != nil {
		return err
	}
	prev := j.Owner
	j.State, j.Owner, j.LeaseUntil, j.EndedAt, j.ExitCode, j.Reason = paddock.JobRunning, nd.jobs.instance(), now().Add(leaseTerm), time.Time{}, nil, ""
	if err := nd.update(ctx, func(tx paddock.Tx) error {
		if err := tx.UpdateJob(ctx, j); err != nil {
			return err
		}
		_, err := tx.AppendEvent(ctx, j.RunID, paddock.EventJobAdopted, map[string]any{"job": j.ID, "kind": j.Kind,
			"previous_owner": prev, "from_node": from, "owner": j.Owner})
		return err
	}); err != nil {
		return err
	}
	if err := nd.jobs.runner.start(ctx, j, func(ctx context.Context) { nd.jobs.runJob(ctx, j, body) }); err != nil {
		j.State, j.Reason, j.EndedAt, j.LeaseUntil = paddock.JobFailed, "the daemon is shutting down", now(), time.Time{}
		nd.jobs.recordJobEnd(j)
		return err
	}
	return nil
}

// Wake wakes the event waiters: another node appended events (the shared
// store's notifications).
func (nd *Nodes) Wake() { nd.notify() }

// nodeFingerprint is the fingerprint run creates on this node check the
// project's repository against: the declared one on a daemon of its own;
// with nodes, this node's own, made from the declared one the first time
// the node uses the project (its copy at the same path, with the same
// history, has its own inode) and kept in its state directory.
func (nd *Nodes) nodeFingerprint(ctx context.Context, repo *gitx.Repo, p *paddock.Project) (string, error) {
	if nd.Cluster == nil {
		return p.Fingerprint, nil
	}
	path := filepath.Join(nd.ArtifactsDir, "fingerprints", p.Name)
	if b, err := os.ReadFile(path); err == nil {
		declared, local, ok := strings.Cut(strings.TrimSpace(string(b)), "\n")
		if ok && declared == p.Fingerprint {
			return local, nil
		}
	}
	local, ok, err := nd.Git.Fingerprints().LocalFingerprint(ctx, repo, p.Fingerprint)
	if err != nil {
		return "", internal("checking the project's repository failed", err)
	}
	if !ok {
		return "", paddock.Errorf(paddock.CodeConflict, "project %q: %s on this node (%s) is not the repository that was declared (another path, or its first commit is missing)",
			p.Name, p.Root, nd.selfNode())
	}
	if err := nd.keepNodeFingerprint(p, local); err != nil {
		return "", internal("keeping this node's fingerprint of the project failed", err)
	}
	nd.log().Info("this node's copy of the project is checked against its own fingerprint from now on", "project", p.Name, "fingerprint", local)
	return local, nil
}

// keepNodeFingerprint keeps local as this node's fingerprint of project
// p's copy (with nodes only).
func (nd *Nodes) keepNodeFingerprint(p *paddock.Project, local string) error {
	if nd.Cluster == nil {
		return nil
	}
	nd.fingerprintMu.Lock() // durable.WriteFile's temporary file is one per path
	defer nd.fingerprintMu.Unlock()
	path := filepath.Join(nd.ArtifactsDir, "fingerprints", p.Name)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return durable.WriteFile(path, []byte(p.Fingerprint+"\n"+local+"\n"))
}

// lastSubmitted is the hash of run id's last submission, from its events
// (which the shared store keeps), or "", and whether it was applied since
// (and not undone).
func (nd *Nodes) lastSubmitted(ctx context.Context, id string) (hash string, applied bool) {
	var after int64
	for {
		evs, err := nd.runs.Events(ctx, id, after, 1000)
		if err != nil || len(evs) == 0 {
			return hash, applied
		}
		for _, e := range evs {
			after = e.Seq
			switch e.Type {
			case paddock.EventSubmitted:
				var d struct {
					Hash string `json:"hash"`
				}
				if json.Unmarshal(e.Data, &d) == nil && d.Hash != "" {
					hash, applied = d.Hash, false
				}
			case paddock.EventApplied:
				applied = true
			case paddock.EventUndone:
				applied = false
			}
		}
	}
}

// adoptingReason starts the reason of a workspace being made by an
// adoption: a restart finds it so and gives the run back (recoverAdoption).
const adoptingReason = "adopted from node "

// giveBack undoes an adoption that failed: what this node made of the
// run (its workspace w, its home) is removed, and the run goes back to the
// node it came from as it was (orig), adoptable again, its checkpoint
// untouched; run.adoption_failed says why.
func (nd *Nodes) giveBack(ctx context.Context, r *paddock.Run, p *paddock.Project, w *paddock.Workspace, orig paddock.Workspace, from, why string) error {
	if prov, err := nd.provider(w.Kind); err == nil {
		if err := prov.Remove(ctx, p, w); err != nil {
			nd.log().Error("removing a failed adoption's workspace failed", "run", r.ID, "err", err)
		}
	}
	if err := nd.views.removeAux(r.ID); err != nil {
		nd.log().Error("removing a failed adoption's home failed", "run", r.ID, "err", err)
	}
	if nd.Harnesses != nil {
		nd.Harnesses.Release(r.ID)
	}
	orig.UpdatedAt = now()
	err := nd.Cluster.ReleaseRun(ctx, r.ID, from, func(tx paddock.Tx) error {
		if err := tx.UpdateWorkspace(ctx, &orig); err != nil {
			return err
		}
		_, err := tx.AppendEvent(ctx, r.ID, paddock.EventAdoptionFailed, map[string]any{"node": nd.selfNode(), "back_to": from, "why": why})
		return err
	})
	if err != nil {
		nd.log().Error("giving a failed adoption's run back failed", "run", r.ID, "err", err)
		nd.notify()
		return err
	}
	os.Remove(nd.adoptionMarkerPath(r.ID))
	nd.forgetRun(r.ID)
	nd.notify()
	return nil
}

// adoptionMarker is what an adoption under way leaves in the run's
// artifacts on this node: the node and workspace to give the run back to.
type adoptionMarker struct {
	From  string                 `json:"from_node"`
	Root  string                 `json:"from_root"`
	State paddock.WorkspaceState `json:"from_state"`
}

func (nd *Nodes) adoptionMarkerPath(id string) string {
	return filepath.Join(nd.runDir(id), "adopting.json")
}

func (nd *Nodes) writeAdoptionMarker(id string, mk adoptionMarker) error {
	if err := os.MkdirAll(nd.runDir(id), 0o700); err != nil {
		return err
	}
	b, _ := json.Marshal(mk)
	return durable.WriteFile(nd.adoptionMarkerPath(id), b)
}

// recoverAdoption gives back a run whose adoption here a crash cut short
// (its marker is still there, whatever its workspace's state): as it was
// before, to the node it came from, adoptable again from its checkpoint,
// which no store touched meanwhile. It reports whether w was such a run.
func (nd *Nodes) recoverAdoption(ctx context.Context, w *paddock.Workspace) (*paddock.Finding, bool) {
	if nd.Cluster == nil {
		return nil, false
	}
	b, err := os.ReadFile(nd.adoptionMarkerPath(w.RunID))
	if err != nil {
		return nil, false
	}
	f := &paddock.Finding{RunID: w.RunID, Path: w.Root, State: w.State, Issue: "an adoption was cut short", Action: "given back"}
	var mk adoptionMarker
	r, p, err := nd.runAndProject(ctx, w.RunID)
	if err == nil {
		err = json.Unmarshal(b, &mk)
	}
	if err == nil && (mk.From == "" || mk.Root == "" || mk.State == "") {
		err = errors.New("the adoption's marker is incomplete")
	}
	if err == nil {
		orig := *w
		orig.Root, orig.State, orig.Reason = mk.Root, mk.State, "its adoption by node "+nd.selfNode()+" was cut short"
		err = nd.giveBack(ctx, r, p, w, orig, mk.From, "the node adopting it stopped")
	}
	if err != nil {
		nd.log().Error("giving back a run whose adoption was cut short failed", "run", w.RunID, "err", err)
		f.Action = paddock.ActionFailed
	}
	return f, true
}
