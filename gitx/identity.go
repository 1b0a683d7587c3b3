package gitx

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"sort"
	"strings"
	"syscall"
)

// A repository's fingerprint is what paddock records of it when a project
// is declared, so that a root later holding another repository is noticed
// rather than trusted. It is checked before every run is made, so checking
// it must cost the same whatever the project's history: reading it once,
// at declaration, may walk the history; checking it never does.
//
// It names three things:
//
//   - a root commit of HEAD's history. Checking that this commit still
//     exists is one object lookup. A root commit is never rewritten or
//     pruned by ordinary work (rebases, resets and gc keep it while any
//     branch descends from it), and another project's repository does not
//     hold it.
//   - the inode number of the repository's common git directory. A
//     directory replaced by another (deleted and cloned again, restored
//     from a backup, another repository moved in) has another inode, even
//     when it holds the same history. The device number is left out on
//     purpose: Linux assigns it when a file system is mounted (btrfs
//     subvolumes, device-mapper volumes, removable disks), so it can change
//     across a reboot while the directory stays the same; the path already
//     pins the file system. An id file written into .git would say the same
//     more portably, but the declared root is written only by apply
//     (invariant 2), so paddock keeps nothing there.
//   - a hash of the common git directory's path, as the fingerprint always
//     held: a root that became a linked worktree of another repository is
//     not the repository that was declared.
//
// A fingerprint written before this form (32 hex digits, a hash of every
// root commit and the path) is still checked the old way, by walking.

// Fingerprints reads and checks repositories' fingerprints with g's git.
type Fingerprints struct{ g *Git }

// Fingerprints is g's reader of fingerprints.
func (g *Git) Fingerprints() Fingerprints { return Fingerprints{g} }

// fingerprintPrefix starts a fingerprint of the current form.
const fingerprintPrefix = "git-root:"

// Fingerprint reads repo's fingerprint. It walks HEAD's history once, to
// find a root commit; CheckFingerprint never does.
func (f Fingerprints) Fingerprint(ctx context.Context, repo *Repo) (string, error) {
	root, err := f.g.line(ctx, repoAt(repo.Root), "rev-list", "--max-parents=0", "--max-count=1", "HEAD", "--")
	if err != nil || root == "" {
		return "", fmt.Errorf("gitx: fingerprint: find a root commit: %w", err)
	}
	ino, err := inode(repo.CommonDir)
	if err != nil {
		return "", fmt.Errorf("gitx: fingerprint: %w", err)
	}
	return fmt.Sprintf("%s%s inode:%d dir:%s", fingerprintPrefix, root, ino, pathHash(repo.CommonDir)), nil
}

// CheckFingerprint reports whether repo is the repository fp was read from.
// Its cost does not depend on the repository's history: a stat and one
// object lookup. An error is a failure to check, not a mismatch.
func (f Fingerprints) CheckFingerprint(ctx context.Context, repo *Repo, fp string) (bool, error) {
	rest, ok := strings.CutPrefix(fp, fingerprintPrefix)
	if !ok {
		return f.checkLegacyFingerprint(ctx, repo, fp)
	}
	var root, dir string
	var ino uint64
	if n, err := fmt.Sscanf(rest, "%s inode:%d dir:%s", &root, &ino, &dir); n != 3 || err != nil || !isHex(root) {
		return false, fmt.Errorf("gitx: malformed fingerprint %q", fp)
	}
	if dir != pathHash(repo.CommonDir) {
		return false, nil
	}
	got, err := inode(repo.CommonDir)
	if err != nil {
		return false, fmt.Errorf("gitx: check fingerprint: %w", err)
	}
	if got != ino {
		return false, nil
	}
	// The object's type, by its full name: a lookup in the pack indexes,
	// never a walk. A missing object is git's exit 128, a mismatch.
	typ, err := f.g.line(ctx, repoAt(repo.Root), "cat-file", "-t", root)
	if err != nil && ctx.Err() != nil {
		return false, fmt.Errorf("gitx: check fingerprint: %w", err)
	}
	return err == nil && typ == "commit", nil
}

// LocalFingerprint is fp as this copy of the repository has it: the same
// root commit (it must exist here) and path, and this copy's inode. Nodes
// that share a store each have their own copy of a project at the same
// path (a clone, a shared file system), with its own inode: a node checks
// its copy against the fingerprint it made this way the first time,
// rather than against the declaring node's inode. ok is false when repo
// is not that repository (another path, or no such root commit).
func (f Fingerprints) LocalFingerprint(ctx context.Context, repo *Repo, fp string) (local string, ok bool, err error) {
	rest, isNew := strings.CutPrefix(fp, fingerprintPrefix)
	if !isNew {
		same, err := f.checkLegacyFingerprint(ctx, repo, fp)
		return fp, same, err
	}
	var root, dir string
	var ino uint64
	if n, err := fmt.Sscanf(rest, "%s inode:%d dir:%s", &root, &ino, &dir); n != 3 || err != nil || !isHex(root) {
		return "", false, fmt.Errorf("gitx: malformed fingerprint %q", fp)
	}
	if dir != pathHash(repo.CommonDir) {
		return "", false, nil
	}
	here, err := inode(repo.CommonDir)
	if err != nil {
		return "", false, fmt.Errorf("gitx: local fingerprint: %w", err)
	}
	typ, err := f.g.line(ctx, repoAt(repo.Root), "cat-file", "-t", root)
	if err != nil && ctx.Err() != nil {
		return "", false, fmt.Errorf("gitx: local fingerprint: %w", err)
	}
	if err != nil || typ != "commit" {
		return "", false, nil
	}
	return fmt.Sprintf("%s%s inode:%d dir:%s", fingerprintPrefix, root, here, dir), true, nil
}

// checkLegacyFingerprint checks a fingerprint of the first form: a hash of
// every root commit of HEAD's history and the common directory's path.
// Checking it walks the whole history; re-declaring the project replaces it.
func (f Fingerprints) checkLegacyFingerprint(ctx context.Context, repo *Repo, fp string) (bool, error) {
	roots, err := f.g.run(ctx, repoAt(repo.Root), "rev-list", "--max-parents=0", "HEAD", "--")
	if err != nil {
		return false, fmt.Errorf("gitx: check fingerprint: %w", err)
	}
	ids := strings.Fields(string(roots))
	sort.Strings(ids)
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s", strings.Join(ids, ","), repo.CommonDir)
	return hex.EncodeToString(h.Sum(nil))[:32] == fp, nil
}

func inode(path string) (uint64, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, fmt.Errorf("no inode for %s", path)
	}
	return st.Ino, nil
}

func pathHash(p string) string {
	h := sha256.Sum256([]byte(p))
	return hex.EncodeToString(h[:8])
}
