package paddockcli

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// What paddock run shows its command of the caller's machine.
//
// A run's view holds the system directories and nothing else of the
// host: an agent's CLI installed anywhere else (a user's npm prefix, nvm,
// Claude Code's ~/.local/bin, a project's node_modules) is not there. So
// paddock run finds the command on the caller's PATH, as the shell would,
// and names what it needs to start as mounts of the run: the directory it
// was found in, the package it belongs to, and its interpreter's (#!),
// each read-only, and it says so.

// systemDirs are what every run's view shows of the host already.
var systemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32", "/etc"}

func inSystem(p string) bool {
	return slices.ContainsFunc(systemDirs, func(d string) bool { return p == d || strings.HasPrefix(p, d+"/") })
}

// foundCommand is a command as the caller's shell would run it.
type foundCommand struct {
	Path        string   // where it was found (argv[0] resolved on PATH)
	Real        string   // the file it is (links followed)
	Interpreter string   // its #! interpreter, as found, if it has one
	Mounts      []string // the directories the run must show for it to start
}

// lookPath finds name as the shell would: a name with a slash as it is
// (relative to dir), else the first executable file of that name on
// pathEnv.
func lookPath(name, pathEnv, dir string) (string, error) {
	if strings.Contains(name, "/") {
		p := name
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		if executable(p) {
			return filepath.Clean(p), nil
		}
		return "", fmt.Errorf("%s is not an executable file", name)
	}
	for _, d := range filepath.SplitList(pathEnv) {
		if d == "" {
			d = "."
		}
		if !filepath.IsAbs(d) {
			d = filepath.Join(dir, d)
		}
		if p := filepath.Join(d, name); executable(p) {
			return filepath.Clean(p), nil
		}
	}
	return "", fmt.Errorf("%s is not on your PATH", name)
}

func executable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// findCommand finds name and what the run must show for it to start.
func findCommand(name, pathEnv, dir string) (*foundCommand, error) {
	p, err := lookPath(name, pathEnv, dir)
	if err != nil {
		return nil, err
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return nil, err
	}
	f := &foundCommand{Path: p, Real: real}
	f.need(filepath.Dir(p), real)
	if interp := shebang(real); interp != "" {
		ip, err := lookPath(interp, pathEnv, dir)
		if err == nil {
			f.Interpreter = ip
			if ireal, err := filepath.EvalSymlinks(ip); err == nil {
				f.need(filepath.Dir(ip), ireal)
			}
		}
	}
	f.Mounts = outermost(f.Mounts)
	return f, nil
}

// need adds what a program found in bin, which is the file real, needs:
// bin itself (so its name is on PATH), and the package real is in (the
// outermost node_modules above it, else its directory), each made real.
func (f *foundCommand) need(bin, real string) {
	if b, err := filepath.EvalSymlinks(bin); err == nil {
		bin = b
	}
	if !inSystem(bin) {
		f.Mounts = append(f.Mounts, bin)
	}
	pkg := filepath.Dir(real)
	for d := pkg; d != "/" && d != "."; d = filepath.Dir(d) {
		if filepath.Base(d) == "node_modules" {
			pkg = d
		}
	}
	if !inSystem(pkg) {
		f.Mounts = append(f.Mounts, pkg)
	}
}

// shebang is the program a script's #! line names (env's argument for
// #!/usr/bin/env PROG), or "".
func shebang(file string) string {
	fh, err := os.Open(file)
	if err != nil {
		return ""
	}
	defer fh.Close()
	buf := make([]byte, 256)
	n, _ := fh.Read(buf)
	line, _, _ := bytes.Cut(buf[:n], []byte("\n"))
	rest, ok := bytes.CutPrefix(line, []byte("#!"))
	if !ok {
		return ""
	}
	words := strings.Fields(string(rest))
	if len(words) == 0 {
		return ""
	}
	if filepath.Base(words[0]) != "env" {
		return words[0]
	}
	for _, w := range words[1:] {
		if !strings.HasPrefix(w, "-") && !strings.Contains(w, "=") {
			return w
		}
	}
	return ""
}

// outermost drops repeats and every directory another one holds, but a
// bin directory, which the run puts on its PATH.
func outermost(dirs []string) []string {
	slices.Sort(dirs)
	dirs = slices.Compact(dirs)
	var out []string
	for _, d := range dirs {
		b := filepath.Base(d)
		if b == "bin" || b == ".bin" || !slices.ContainsFunc(out, func(o string) bool { return strings.HasPrefix(d, o+"/") }) {
			out = append(out, d)
		}
	}
	return out
}
