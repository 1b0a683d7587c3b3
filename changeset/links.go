package changeset

import (
	"path"
	"strings"

	"github.com/paddock-dev/paddock/confine"
)

// NeverApplied says why an entry at p (slash-separated, relative to the
// project root) is never applied, approved or not, or "": a path under
// .git, or a symbolic link (isLink, to target) that leads out of the
// project, into .git, or to a path the project's policy protects.
//
// A link's target is resolved lexically from the link's directory and
// judged by the rules that judge paths: .git by every folding (case,
// Unicode look-alikes, trailing dots and spaces, 8.3 short names) at any
// depth, protected paths and the directories that hold them
// (confine.Policy.Match). A link to a directory above .git — the project
// root, say — is not refused: reaching .git through it takes a path that
// names .git, and no apply writes through a link.
func NeverApplied(p string, isLink bool, target string, policy *confine.Policy) string {
	for _, c := range strings.Split(p, "/") {
		if confine.IsDotGit(c) {
			return "under .git: never applied"
		}
	}
	if !isLink {
		return ""
	}
	if path.IsAbs(target) {
		return "a symbolic link that leads out of the project: never applied"
	}
	to := path.Clean(path.Join(path.Dir(p), target))
	if to == ".." || strings.HasPrefix(to, "../") {
		return "a symbolic link that leads out of the project: never applied"
	}
	for _, c := range strings.Split(to, "/") {
		if confine.IsDotGit(c) {
			return "a symbolic link into .git (" + to + "): never applied"
		}
	}
	if policy != nil && to != "." && policy.Match(to) != "" {
		return "a symbolic link to a protected path (" + to + "): never applied"
	}
	return ""
}
