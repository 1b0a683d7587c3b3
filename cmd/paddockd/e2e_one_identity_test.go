package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestOneIdentity: a run's tools and its shell act on the workspace as one
// unprivileged identity, whatever the kind: what a tool writes the shell
// can change, and the other way round, under a root daemon and under an
// unprivileged one.
func TestOneIdentity(t *testing.T) {
	for _, as := range []string{"root", "nobody"} {
		t.Run(as, func(t *testing.T) {
			if os.Getuid() != 0 {
				t.Skip("needs root: it runs one daemon as root and one as another user")
			}
			base := t.TempDir()
			os.Chmod(base, 0o755)
			os.Chmod(filepath.Dir(base), 0o755)
			home := filepath.Join(base, "home")
			repo := newRepo(t, filepath.Join(base, "src", "app"), 2)
			if as == "nobody" {
				filepath.Walk(base, func(p string, fi os.FileInfo, err error) error {
					if err == nil {
						os.Lchown(p, 65534, 65534)
					}
					return nil
				})
				startDaemonAs(t, home, &syscall.Credential{Uid: 65534, Gid: 65534})
			} else {
				startDaemon(t, home)
			}
			cli(t, home, "project", "add", repo).must(t)
			for _, kind := range []string{"auto", "clone", "worktree"} {
				id := strings.TrimSpace(cli(t, home, "create", "-p", "app", "--kind", kind).must(t).out)
				cli(t, home, "tool", id, "write", "--arg", "path=tool.txt", "--arg", "content=by the tool\n").must(t)
				cli(t, home, "tool", id, "write", "--arg", "path=dir/tool.txt", "--arg", "content=by the tool\n").must(t)
				r := cli(t, home, "exec", id, "--", "sh", "-c", "echo by the shell >> tool.txt && echo x > dir/shell.txt && rm dir/tool.txt && echo by the shell > shell.txt")
				if r.code != 0 {
					t.Fatalf("%s: the shell cannot change what the tool wrote: %d %s", kind, r.code, r.err)
				}
				cli(t, home, "tool", id, "edit", "--arg", "path=shell.txt", "--arg", "old_string=by the shell", "--arg", "new_string=edited by the tool").must(t)
				cli(t, home, "tool", id, "delete", "--arg", "path=dir/shell.txt").must(t)
				if out := cli(t, home, "exec", id, "--", "cat", "tool.txt", "shell.txt").must(t).out; out != "by the tool\nby the shell\nedited by the tool\n" {
					t.Fatalf("%s: %q", kind, out)
				}
				cli(t, home, "reject", id).must(t)
			}
		})
	}
}
