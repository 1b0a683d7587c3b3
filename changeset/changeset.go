// Package changeset turns what git reports about a workspace into a
// paddock.ChangeSet: entries with risk labels, the unified diff, and the
// hash approvals bind to. It runs no git itself (gitx does) and touches no
// file but the workspace's, read-only.
package changeset

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/confine"
	"github.com/paddock-dev/paddock/gitx"
	"github.com/paddock-dev/paddock/redact"
	"github.com/paddock-dev/paddock/termsafe"
)

// LargeFile is the size from which an entry is labelled large.
const LargeFile = 1 << 20

// Build makes the change set of the workspace at root from git's snapshot,
// whose diff is in the file diffFile.
//
// The diff is masked in place first (see MaskDiff; red holds the run's
// declared secrets): from then on only the masked diff exists, and it is
// what the hash binds, what is stored and what every answer shows. Paths
// are masked the same way; an entry whose name held a secret is never
// applied. Each entry whose part of the diff was masked is labelled
// secret, and one whose name or changed lines hold a character a terminal
// acts on is labelled control_chars.
//
// Labels that compare an entry with the others and with the base (names
// that collide: see labelNames; files a protected .envrc sources: see
// labelSourced) read the base and the project's .envrc files from trees.
//
// A diff of at most paddock.InlineDiff bytes is read once and carried
// whole; a larger one is hashed as a stream and left in its file.
func Build(runID, base, root string, snap *gitx.Snapshot, diffFile string, policy *confine.Policy, red *redact.Redactor, trees Trees) (*paddock.ChangeSet, error) {
	entries, err := parseRaw(snap.Raw)
	if err != nil {
		return nil, err
	}
	// Masking reads the diff and the labels read the workspace and the
	// base: neither needs the other, so they run side by side (a change set
	// of thousands of files costs each of them about as much).
	var found map[string]*Finding
	masked := make(chan error, 1)
	go func(blobs map[string]string) {
		var err error
		found, err = maskInPlace(red, diffFile, root, blobs)
		masked <- err
	}(newBlobs(entries))
	err = labelEntries(entries, root, policy, trees)
	if merr := <-masked; merr != nil {
		return nil, merr
	}
	if err != nil {
		return nil, err
	}
	cs, err := assemble(runID, base, root, snap, diffFile, entries, found, policy, red)
	if err != nil {
		return nil, err
	}
	if cs.Hash, err = Hash(cs); err != nil {
		return nil, err
	}
	return cs, nil
}

// assemble is the change set of the labelled entries and the masked diff
// in diffFile, what masking found in it at hand: all but its hash.
func assemble(runID, base, root string, snap *gitx.Snapshot, diffFile string, entries []paddock.ChangeEntry, found map[string]*Finding, policy *confine.Policy, red *redact.Redactor) (*paddock.ChangeSet, error) {
	cs := &paddock.ChangeSet{RunID: runID, BaseRevision: base, DiffFile: diffFile, Ignored: red.Strings(snap.Ignored),
		Entries: entries, ComputedAt: time.Now().UTC()}
	fi, err := os.Stat(diffFile)
	if err != nil {
		return nil, fmt.Errorf("changeset: %w", err)
	}
	cs.DiffSize = fi.Size()
	if cs.DiffSize <= paddock.InlineDiff {
		b, err := os.ReadFile(diffFile)
		if err != nil {
			return nil, fmt.Errorf("changeset: %w", err)
		}
		cs.Diff = string(b)
	} else {
		cs.DiffOmitted = true
	}
	// Masking comes last: the labels above compare the paths as they are.
	for i := range cs.Entries {
		review(&cs.Entries[i], red, found)
	}
	addWithheld(cs, snap.Withheld, root, policy, red)
	return cs, nil
}

// parseRaw is the entries of git's raw output (-z), unlabelled.
func parseRaw(raw []byte) ([]paddock.ChangeEntry, error) {
	entries := []paddock.ChangeEntry{}
	fields := bytes.Split(raw, []byte{0})
	for i := 0; i+1 < len(fields); i += 2 {
		meta, p := string(fields[i]), string(fields[i+1])
		if !strings.HasPrefix(meta, ":") {
			return nil, fmt.Errorf("changeset: unexpected git output %q", meta)
		}
		f := strings.Fields(meta[1:])
		if len(f) != 5 {
			return nil, fmt.Errorf("changeset: unexpected git output %q", meta)
		}
		e := paddock.ChangeEntry{Path: p, OldMode: f[0], NewMode: f[1], OldBlob: f[2], NewBlob: f[3]}
		switch f[4] {
		case "A":
			e.Op, e.OldMode, e.OldBlob = paddock.OpCreate, "", ""
		case "D":
			e.Op, e.NewMode, e.NewBlob = paddock.OpDelete, "", ""
		default:
			e.Op = paddock.OpModify
		}
		entries = append(entries, e)
	}
	return entries, nil
}

// newBlobs is each entry's new blob id by path, for what label learned
// of a blob to serve masking too (see keySpanReader).
func newBlobs(entries []paddock.ChangeEntry) map[string]string {
	m := make(map[string]string, len(entries))
	for _, e := range entries {
		if e.NewBlob != "" {
			m[e.Path] = e.NewBlob
		}
	}
	return m
}

// labelEntries labels each entry alone and then across the others and
// the base.
func labelEntries(entries []paddock.ChangeEntry, root string, policy *confine.Policy, trees Trees) error {
	// What the labels across the entries read of the trees depends on
	// their paths alone: it is read while each is labelled alone.
	reads := make(chan *acrossReads, 1)
	go func(dirs []string) { reads <- readAcross(dirs, trees) }(entryDirs(entries))
	labelAll(entries, root, policy)
	return labelAcross(entries, root, policy, trees, <-reads)
}

// labelAll labels each entry alone (see label), a few at a time: each
// reads its file through the workspace, and a change set of thousands of
// files waits on those reads more than on the processor.
func labelAll(entries []paddock.ChangeEntry, root string, policy *confine.Policy) {
	workers := min(runtime.GOMAXPROCS(0)*2, 8, len(entries)/64+1)
	next := atomic.Int64{}
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < len(entries); i = int(next.Add(1) - 1) {
				label(&entries[i], root, policy)
			}
		}()
	}
	wg.Wait()
}

// maskInPlace replaces the diff in the file path with its masked form;
// the workspace at root, or what label learned of blobs (each path's new
// blob id), gives the key spans of a file's new content (see MaskDiff).
func maskInPlace(red *redact.Redactor, path, root string, blobs map[string]string) (map[string]*Finding, error) {
	tmp := path + ".masked"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("changeset: %w", err)
	}
	keys := newKeySpanReader(root, blobs)
	found, err := maskDiff(red, path, f, keys.of)
	keys.close()
	if err = errors.Join(err, f.Close()); err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return nil, fmt.Errorf("changeset: masking the diff: %w", err)
	}
	return found, nil
}

// openRegular opens the regular file at p under root for reading, without
// following a link in its last name and without blocking on a FIFO.
func openRegular(root, p string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(root, filepath.FromSlash(p)), os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("changeset: %s is not a file", p)
	}
	return f, nil
}

// addWithheld adds the work tree's files that no diff holds (.git
// entries, embedded repositories: see gitx.Snapshot) as entries, labelled
// and blocked, in path order with the others; reviewed as the others are
// (a name that holds a secret is shown masked, and so is the reason,
// which may name a directory).
func addWithheld(cs *paddock.ChangeSet, withheld []gitx.Withheld, root string, policy *confine.Policy, red *redact.Redactor) {
	if len(withheld) == 0 {
		return
	}
	for _, w := range withheld {
		e := withheldEntry(w)
		label(&e, root, policy)
		e.Risks = append(e.Risks, "git_repository")
		e.Blocked = w.Why
		review(&e, red, nil)
		cs.Entries = append(cs.Entries, e)
	}
	sort.SliceStable(cs.Entries, func(i, j int) bool { return cs.Entries[i].Path < cs.Entries[j].Path })
}

// withheldEntry is the entry of a file no diff holds, unlabelled.
func withheldEntry(w gitx.Withheld) paddock.ChangeEntry {
	e := paddock.ChangeEntry{Path: w.Path, Op: paddock.OpModify, OldMode: w.OldMode, NewMode: w.NewMode, OldBlob: w.OldBlob, NewBlob: w.NewBlob}
	if w.OldMode == "" {
		e.Op = paddock.OpCreate
	}
	return e
}

// OpenDiff opens cs's whole diff: the diff it carries, or, when that is
// omitted, its file.
func OpenDiff(cs *paddock.ChangeSet) (io.ReadCloser, error) {
	if !cs.DiffOmitted {
		return io.NopCloser(strings.NewReader(cs.Diff)), nil
	}
	f, err := os.Open(cs.DiffFile)
	if err != nil {
		return nil, fmt.Errorf("changeset: %w", err)
	}
	return f, nil
}

// Hash is the sha256 of the change set's canonical form: its base, its
// entries (paths, ops, modes, blob ids) and its diff (read as a stream).
// Labels and times are not part of it: they describe the change, they are
// not the change.
//
// The diff hashed is the masked one (see Build), the only one paddock
// keeps: what a reviewer saw is exactly what the hash names, and anyone
// holding the change set can check its hash. What an apply writes is bound
// by the entries' blob ids, git's hashes of the exact new bytes, which the
// frozen blobs are checked against when they are frozen and again when git
// stores them; a masked line changes no blob id, so two change sets that
// differ only in a secret's value still have different hashes. (A blob id
// is a hash of a file's bytes, secret included: a value that can be
// guessed could be confirmed against it. The hash adds nothing to that.)
func Hash(cs *paddock.ChangeSet) (string, error) {
	h := sha256.New()
	h.Write(hashHead(cs.BaseRevision, cs.Entries))
	d, err := OpenDiff(cs)
	if err != nil {
		return "", err
	}
	defer d.Close()
	if _, err := io.Copy(h, d); err != nil {
		return "", fmt.Errorf("changeset: reading the diff: %w", err)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// hashHead is what the hash binds before the diff: the base and the
// entries.
func hashHead(base string, entries []paddock.ChangeEntry) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "paddock-changeset-v1\nbase %s\n", base)
	for _, e := range entries {
		fmt.Fprintf(&b, "%s\x00%s\x00%s\x00%s\x00%s\x00%s\n", e.Path, e.Op, e.OldMode, e.NewMode, e.OldBlob, e.NewBlob)
	}
	return b.Bytes()
}

// Verify checks that cs's hash matches its content.
func Verify(cs *paddock.ChangeSet) error {
	if h, err := Hash(cs); err != nil || h != cs.Hash {
		return paddock.Errorf(paddock.CodeConflict, "the change set does not match its hash")
	}
	return nil
}

var ciPaths = []string{".github/workflows/", ".gitlab-ci.yml", ".circleci/", "azure-pipelines.yml", "Jenkinsfile",
	".travis.yml", ".buildkite/", "bitbucket-pipelines.yml", ".drone.yml", ".woodpecker"}

var manifests = map[string]bool{
	"go.mod": true, "go.sum": true, "package.json": true, "package-lock.json": true, "yarn.lock": true,
	"pnpm-lock.yaml": true, "npm-shrinkwrap.json": true, "requirements.txt": true, "pyproject.toml": true,
	"poetry.lock": true, "Pipfile": true, "Pipfile.lock": true, "setup.py": true, "setup.cfg": true,
	"Cargo.toml": true, "Cargo.lock": true, "Gemfile": true, "Gemfile.lock": true, "pom.xml": true,
	"build.gradle": true, "build.gradle.kts": true, "composer.json": true, "composer.lock": true,
	"mix.exs": true, "mix.lock": true, "Package.swift": true, "Package.resolved": true, "uv.lock": true,
}

var hookDirs = []string{".husky/", ".githooks/", ".git-hooks/", "hooks/"}

var labelBufs = sync.Pool{New: func() any { b := make([]byte, 64<<10); return &b }}

// label sets e's risks, size, binary flag and whether it is ever applied.
func label(e *paddock.ChangeEntry, root string, policy *confine.Policy) {
	add := func(r string) { e.Risks = append(e.Risks, r) }
	p := e.Path
	base := path.Base(p)
	for _, c := range ciPaths {
		if strings.HasPrefix(p, c) || p == strings.TrimSuffix(c, "/") {
			add("ci_config")
			break
		}
	}
	if manifests[base] {
		add("dependency_manifest")
	}
	if base == ".gitattributes" || base == ".gitmodules" {
		add("git_config")
	}
	for _, h := range hookDirs {
		if strings.HasPrefix(p, h) || strings.Contains(p, "/"+h) {
			add("hook_directory")
			break
		}
	}
	blockProtected(e, policy)
	labelSteering(e)
	labelHooks(e, policy)
	if e.NewMode == "100755" && e.OldMode != "100755" {
		add("executable")
	}
	if e.NewMode == "160000" || e.OldMode == "160000" {
		add("submodule")
	}
	if suspiciousName(p) {
		add("suspicious_name")
	}
	for _, c := range strings.Split(p, "/") {
		if confine.IsDotGit(c) {
			e.Blocked = "under .git: never applied"
		}
	}
	if e.Op == paddock.OpDelete {
		return
	}
	if e.NewMode != "120000" {
		if c, ok := factsOf(e.NewBlob); ok {
			c.label(e, add)
			return
		}
	}
	full := filepath.Join(root, filepath.FromSlash(p))
	// Opened first, without following a link: a link is the rare case,
	// told by ELOOP, and only then looked at as a link.
	f, err := os.OpenFile(full, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, syscall.ELOOP) {
		if fi, lerr := os.Lstat(full); lerr == nil && fi.Mode()&os.ModeSymlink != 0 {
			add("symlink")
			target, _ := os.Readlink(full)
			e.Size = int64(len(target))
			if why := NeverApplied(p, true, target, policy); why != "" {
				e.Blocked = why
			}
		}
		return
	}
	if err != nil {
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return
	}
	if !fi.Mode().IsRegular() {
		contentFacts{size: fi.Size()}.label(e, add)
		return
	}
	c, id := readFacts(f, fi.Size())
	c.label(e, add)
	if id == e.NewBlob {
		keepFacts(id, c)
	}
}

// contentFacts is what label learns of a file's content: its size,
// whether it is binary (a NUL in its first 8,000 bytes), whether it holds
// a credential's shape, which of its lines lie inside a private key. They
// are its content's alone, so they are kept by blob id (blobFacts): a
// change set computed again reads only the files whose content is new to
// it, for its labels and for masking its diff.
type contentFacts struct {
	size           int64
	binary, secret bool
	keys           []span // the lines inside a private key (see keySpansOf), for masking
	// manyKeys: the content holds more keys than are kept with its facts
	// (maxKeptKeys); masking reads it again for them.
	manyKeys bool
}

// maxKeptKeys bounds the key spans kept with a blob's facts: the facts of
// thousands of blobs are kept, and a file of many tiny keys must not make
// them large.
const maxKeptKeys = 64

func (c contentFacts) label(e *paddock.ChangeEntry, add func(string)) {
	e.Size, e.Binary = c.size, c.binary
	if c.size > LargeFile {
		add("large")
	}
	if c.binary {
		add("binary")
	} else if c.secret {
		add("secret")
	}
}

// readFacts reads f, size bytes long, for its facts, and returns its blob
// id when it read all of it (a file of at most LargeFile), else "".
func readFacts(f *os.File, size int64) (contentFacts, string) {
	c := contentFacts{size: size}
	// One buffer for every entry of a change set (ten thousand files
	// must not cost ten thousand reads into fresh memory).
	bp := labelBufs.Get().(*[]byte)
	defer labelBufs.Put(bp)
	head := (*bp)[:8000]
	n, _ := io.ReadFull(f, head)
	c.binary = bytes.IndexByte(head[:n], 0) >= 0
	if size > LargeFile {
		return c, ""
	}
	b := (*bp)[:n]
	if n == len(head) {
		buf := bytes.NewBuffer(b)
		buf.ReadFrom(io.LimitReader(f, LargeFile+1))
		b = buf.Bytes()
	}
	if cap(b) <= 4<<20 {
		*bp = b[:cap(b)]
	}
	if int64(len(b)) != size || len(b) > LargeFile {
		return c, "" // it changed while it was read
	}
	if !c.binary {
		c.secret = !bytes.Equal(redact.Shapes(b), b)
	}
	if bytes.Contains(b, keyWord) {
		c.keys, _ = keySpansOf(bytes.NewReader(b), nil)
		if len(c.keys) > maxKeptKeys {
			c.keys, c.manyKeys = nil, true
		}
	}
	return c, BlobID(b)
}

// blobFacts keeps the facts of the blobs labelled lately, by SHA-1 blob
// id, for every change set of the daemon alike (a blob's facts are the
// same in every run). Bounded: when full, it starts again.
var blobFacts = struct {
	sync.Mutex
	m map[string]contentFacts
}{m: map[string]contentFacts{}}

const maxBlobFacts = 1 << 16

func factsOf(id string) (contentFacts, bool) {
	if len(id) != 40 {
		return contentFacts{}, false
	}
	blobFacts.Lock()
	defer blobFacts.Unlock()
	c, ok := blobFacts.m[id]
	return c, ok
}

func keepFacts(id string, c contentFacts) {
	if len(id) != 40 {
		return
	}
	blobFacts.Lock()
	defer blobFacts.Unlock()
	if len(blobFacts.m) >= maxBlobFacts {
		blobFacts.m = map[string]contentFacts{}
	}
	blobFacts.m[id] = c
}

// review labels e by what masking the diff found in its part, and masks
// its path: a name that held a secret cannot be shown as it is, so what is
// shown is not what an apply would write, and it is never applied.
func review(e *paddock.ChangeEntry, red *redact.Redactor, found map[string]*Finding) {
	for k, n := range e.Notes {
		e.Notes[k] = red.String(n) // they name other paths
	}
	e.Blocked = red.String(e.Blocked) // it may quote a .envrc
	if p := red.String(e.Path); p != e.Path {
		e.Path = p
		addRisk(e, "secret")
		e.Blocked = "its name holds a secret, which is shown masked: never applied"
	}
	if f := found[e.Path]; f != nil && f.Masked {
		addRisk(e, "secret")
	}
	if f := found[e.Path]; (f != nil && f.Control) || termsafe.HasInName(e.Path) {
		addRisk(e, "control_chars")
	}
}

func addRisk(e *paddock.ChangeEntry, r string) {
	if !slices.Contains(e.Risks, r) {
		e.Risks = append(e.Risks, r)
	}
}

// labelHooks labels an entry in the project's configured hooks
// directory (core.hooksPath) as a hook, and never applies it: git would
// run it on the user's next commit, as it would one in .git/hooks.
func labelHooks(e *paddock.ChangeEntry, policy *confine.Policy) {
	why := policy.MatchHooks(e.Path)
	if why == "" {
		return
	}
	if !slices.Contains(e.Risks, "hook_directory") {
		e.Risks = append(e.Risks, "hook_directory")
	}
	e.Blocked = why + ": never applied"
}

// suspiciousName flags names that a person could misread, or that another
// platform cannot hold: look-alikes of ASCII, invisible characters, and what
// Windows and macOS refuse.
func suspiciousName(p string) bool {
	for _, c := range strings.Split(p, "/") {
		if confine.Disguised(c) {
			return true // a look-alike or an invisible character
		}
		if strings.ContainsAny(c, `<>:"\|?*`) || strings.HasSuffix(c, ".") || strings.HasSuffix(c, " ") {
			return true
		}
		for _, r := range c {
			if r < 0x20 || unicode.Is(unicode.Cf, r) {
				return true
			}
		}
		stem := strings.ToUpper(strings.SplitN(c, ".", 2)[0])
		switch stem {
		case "CON", "PRN", "AUX", "NUL", "COM1", "COM2", "COM3", "COM4", "LPT1", "LPT2", "LPT3":
			return true
		}
	}
	return false
}

// Marshal encodes a change set for an artifact.
func Marshal(cs *paddock.ChangeSet) ([]byte, error) { return json.MarshalIndent(cs, "", "  ") }
