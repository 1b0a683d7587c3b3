package deb

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/paddock-dev/paddock/internal/testenv"
)

// The repository's root, from this package's directory.
const repo = "../.."

// What the package installs besides docs/*.md (wantFiles adds those),
// with each file's mode.
var packaged = map[string]string{
	"usr/bin/paddock":                                  "-rwxr-xr-x",
	"usr/bin/paddockd":                                 "-rwxr-xr-x",
	"usr/lib/systemd/system/paddock.service":           "-rw-r--r--",
	"usr/lib/sysusers.d/paddock.conf":                  "-rw-r--r--",
	"usr/lib/tmpfiles.d/paddock.conf":                  "-rw-r--r--",
	"usr/share/bash-completion/completions/paddock":    "-rw-r--r--",
	"usr/share/zsh/vendor-completions/_paddock":        "-rw-r--r--",
	"usr/share/fish/vendor_completions.d/paddock.fish": "-rw-r--r--",
	"usr/share/doc/paddock/README.md":                  "-rw-r--r--",
	"usr/share/doc/paddock/copyright":                  "-rw-r--r--",
	"usr/share/doc/paddock/changelog.gz":               "-rw-r--r--",
	"usr/share/lintian/overrides/paddock":              "-rw-r--r--",
}

// completions: each shell's file, as `paddock completion SHELL` prints it.
var completions = map[string]string{
	"bash": "usr/share/bash-completion/completions/paddock",
	"zsh":  "usr/share/zsh/vendor-completions/_paddock",
	"fish": "usr/share/fish/vendor_completions.d/paddock.fish",
}

// The unit's place, and the state it runs with.
const (
	unitPath = "usr/lib/systemd/system/paddock.service"
	varLib   = "/var/lib/paddock"
	stateDir = "/var/lib/paddock/state"
)

var built struct {
	once sync.Once
	dir  string
	deb  string
	took time.Duration
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// buildDeb builds the package with ./build, once for all the tests here,
// and returns its path.
func buildDeb(t *testing.T) string {
	t.Helper()
	for _, tool := range []string{"bash", "go", "git", "dpkg-deb", "dpkg", "gzip", "md5sum"} {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.Need(t, "building the package needs %s", tool)
		}
	}
	built.once.Do(func() {
		built.dir, built.err = os.MkdirTemp("", "paddock-deb-")
		if built.err != nil {
			return
		}
		start := time.Now()
		cmd := exec.Command("bash", "build", built.dir)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		built.took = time.Since(start)
		if err != nil {
			built.err = fmt.Errorf("contrib/deb/build: %w\n%s", err, stderr.Bytes())
			return
		}
		built.deb = strings.TrimSpace(string(out))
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.deb
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, out, ee.Stderr)
		}
		t.Fatalf("%s %s: %v", name, strings.Join(args, " "), err)
	}
	return string(out)
}

// TestPackage builds the package and reads it: its control fields, that
// it holds every file it should and no other (root's, with their modes),
// static binaries, the unit as contrib/systemd has it, the user and state
// directory it runs with, completions from the binary, docs and licenses.
func TestPackage(t *testing.T) {
	deb := buildDeb(t)
	fi, err := os.Stat(deb)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("built %s, %d KiB, in %v", filepath.Base(deb), fi.Size()>>10, built.took.Round(time.Second))

	fields := control(t, deb)
	checkControl(t, fields, filepath.Base(deb))
	checkContents(t, deb)
	root := t.TempDir()
	run(t, "dpkg-deb", "--extract", deb, root)
	ctl := t.TempDir()
	run(t, "dpkg-deb", "--control", deb, ctl)
	checkMaintainerScripts(t, root, ctl)
	checkStatic(t, root)
	checkUnit(t, root)
	checkCompletions(t, root, filepath.Join(root, "usr/bin/paddock"))
	checkDocs(t, root, fields["Version"])
	lintian(t, deb)
}

// control reads the package's control fields.
func control(t *testing.T, deb string) map[string]string {
	t.Helper()
	fields := map[string]string{}
	var last string
	sc := bufio.NewScanner(strings.NewReader(run(t, "dpkg-deb", "--field", deb)))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, " ") && last != "" {
			fields[last] += "\n" + line
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			t.Fatalf("control line %q", line)
		}
		last = k
		fields[k] = strings.TrimSpace(v)
	}
	return fields
}

func checkControl(t *testing.T, f map[string]string, name string) {
	t.Helper()
	if f["Package"] != "paddock" {
		t.Errorf("Package: %q", f["Package"])
	}
	if want := wantVersion(t); f["Version"] != want {
		t.Errorf("Version: %q, want %q from git describe", f["Version"], want)
	}
	if out, err := exec.Command("dpkg", "--validate-version", f["Version"]).CombinedOutput(); err != nil {
		t.Errorf("Version %q is not a Debian version: %s", f["Version"], out)
	}
	if want := debianArch(t); f["Architecture"] != want {
		t.Errorf("Architecture: %q, want %q", f["Architecture"], want)
	}
	if want := fmt.Sprintf("paddock_%s_%s.deb", f["Version"], f["Architecture"]); name != want {
		t.Errorf("the package is %s, want %s", name, want)
	}
	for _, dep := range []string{"git (>= 1:2.31)", "systemd | systemd-standalone-sysusers | systemd-sysusers", "systemd | systemd-standalone-tmpfiles | systemd-tmpfiles"} {
		if !strings.Contains(f["Depends"], dep) {
			t.Errorf("Depends %q lacks %s", f["Depends"], dep)
		}
	}
	if !strings.Contains(f["Recommends"], "ca-certificates") {
		t.Errorf("Recommends %q lacks ca-certificates (the credential proxy's upstream TLS)", f["Recommends"])
	}
	if !regexp.MustCompile(`^[^<>]+ <[^<>@\s]+@[^<>@\s]+>$`).MatchString(f["Maintainer"]) {
		t.Errorf("Maintainer: %q", f["Maintainer"])
	}
	if n, err := strconv.Atoi(f["Installed-Size"]); err != nil || n < 1024 {
		t.Errorf("Installed-Size: %q", f["Installed-Size"])
	}
	if d := f["Description"]; !strings.Contains(d, "\n ") || len(strings.SplitN(d, "\n", 2)[0]) > 80 {
		t.Errorf("Description wants a synopsis and a long description: %q", d)
	}
}

// wantVersion is the Debian version git describe gives HEAD (the build
// script's rule, as contrib/deb/build's comment states it).
func wantVersion(t *testing.T) string {
	t.Helper()
	desc := strings.TrimSpace(run(t, "git", "describe", "--tags", "--always", "--long", "--dirty", "--match", "v[0-9]*"))
	cmd := exec.Command("git", "log", "-1", "--format=%cd", "--date=format-local:%Y%m%d")
	cmd.Env = append(os.Environ(), "TZ=UTC")
	date, err := cmd.Output()
	if err != nil {
		t.Fatalf("git log: %v", err)
	}
	dirty := ""
	if d, ok := strings.CutSuffix(desc, "-dirty"); ok {
		desc, dirty = d, "+dirty"
	}
	if m := regexp.MustCompile(`^v([0-9].*)-([0-9]+)-g([0-9a-f]+)$`).FindStringSubmatch(desc); m != nil {
		v := strings.ReplaceAll(m[1], "-", "~")
		if m[2] != "0" {
			v += fmt.Sprintf("+git%s.%s.%s", strings.TrimSpace(string(date)), m[2], m[3])
		}
		return v + dirty
	}
	return "0.0~git" + strings.TrimSpace(string(date)) + "." + desc + dirty
}

// debianArch is Debian's name of the architecture go builds for.
func debianArch(t *testing.T) string {
	t.Helper()
	goarch := strings.TrimSpace(run(t, "go", "env", "GOARCH"))
	arch, ok := map[string]string{"amd64": "amd64", "arm64": "arm64", "386": "i386", "ppc64le": "ppc64el",
		"riscv64": "riscv64", "s390x": "s390x", "loong64": "loong64", "mips64le": "mips64el"}[goarch]
	if goarch == "arm" {
		arch, ok = "armhf", true
		if v := strings.TrimSpace(run(t, "go", "env", "GOARM")); strings.HasPrefix(v, "5") || strings.HasPrefix(v, "6") {
			arch = "armel"
		}
	}
	if !ok {
		t.Fatalf("no Debian architecture known here for GOARCH=%s", goarch)
	}
	return arch
}

// wantFiles is every file the package holds, with its mode.
func wantFiles(t *testing.T) map[string]string {
	t.Helper()
	want := map[string]string{}
	for p, m := range packaged {
		want[p] = m
	}
	docs, err := filepath.Glob(filepath.Join(repo, "docs", "*.md"))
	if err != nil || len(docs) == 0 {
		t.Fatalf("no docs/*.md: %v", err)
	}
	for _, d := range docs {
		want["usr/share/doc/paddock/docs/"+filepath.Base(d)] = "-rw-r--r--"
	}
	return want
}

// packagedFiles lists the package's files (not its directories), with
// each one's mode and owner, from dpkg-deb --contents.
func packagedFiles(t *testing.T, deb string) map[string][2]string {
	t.Helper()
	files := map[string][2]string{}
	for _, line := range strings.Split(strings.TrimSpace(run(t, "dpkg-deb", "--contents", deb)), "\n") {
		f := strings.Fields(line)
		if len(f) < 6 {
			t.Fatalf("dpkg-deb --contents line %q", line)
		}
		if p := strings.TrimPrefix(f[5], "./"); !strings.HasPrefix(f[0], "d") {
			files[p] = [2]string{f[0], f[1]}
		}
	}
	return files
}

func checkContents(t *testing.T, deb string) {
	t.Helper()
	want, got := wantFiles(t), packagedFiles(t, deb)
	for p, mode := range want {
		switch g, ok := got[p]; {
		case !ok:
			t.Errorf("the package lacks /%s", p)
		case g[0] != mode || g[1] != "root/root":
			t.Errorf("/%s is %s %s, want %s root/root", p, g[0], g[1], mode)
		}
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			t.Errorf("the package holds /%s, which it should not", p)
		}
	}
}

// checkMaintainerScripts: the scripts are there, runnable and valid sh,
// and md5sums covers exactly the package's files, with their sums.
func checkMaintainerScripts(t *testing.T, root, ctl string) {
	t.Helper()
	for _, s := range []string{"postinst", "prerm", "postrm"} {
		p := filepath.Join(ctl, s)
		fi, err := os.Stat(p)
		if err != nil {
			t.Errorf("no %s: %v", s, err)
			continue
		}
		if fi.Mode().Perm() != 0o755 {
			t.Errorf("%s has mode %v", s, fi.Mode().Perm())
		}
		if out, err := exec.Command("sh", "-n", p).CombinedOutput(); err != nil {
			t.Errorf("%s is not valid sh: %v\n%s", s, err, out)
		}
	}
	sums, err := os.ReadFile(filepath.Join(ctl, "md5sums"))
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(sums)), "\n") {
		_, p, _ := strings.Cut(line, "  ")
		listed[p] = true
	}
	for p := range wantFiles(t) {
		if !listed[p] {
			t.Errorf("md5sums does not list %s", p)
		}
	}
	cmd := exec.Command("md5sum", "--check", "--quiet", filepath.Join(ctl, "md5sums"))
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil || len(listed) != len(wantFiles(t)) {
		t.Errorf("md5sums (%d files) against the package's files: %v\n%s", len(listed), err, out)
	}
}

// checkStatic: neither binary asks for a dynamic loader or libraries, as
// CGO_ENABLED=0 builds them (README.md).
func checkStatic(t *testing.T, root string) {
	t.Helper()
	for _, b := range []string{"usr/bin/paddock", "usr/bin/paddockd"} {
		f, err := elf.Open(filepath.Join(root, b))
		if err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		if f.Type != elf.ET_EXEC {
			t.Errorf("%s is %v, want a static executable (ET_EXEC)", b, f.Type)
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
				t.Errorf("%s has a %v program header: not static", b, p.Type)
			}
		}
		f.Close()
	}
}

// directives is a unit's or a drop-in's lines but comments and blanks.
func directives(text string) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") && !strings.HasPrefix(l, ";") {
			out = append(out, l)
		}
	}
	return out
}

// checkUnit: the packaged unit is contrib/systemd's with the installed
// binary, and the user it runs as and the directories it writes are the
// ones the sysusers.d and tmpfiles.d files make, the state its alone.
func checkUnit(t *testing.T, root string) {
	t.Helper()
	contrib, err := os.ReadFile(filepath.Join(repo, "contrib/systemd/paddock.service"))
	if err != nil {
		t.Fatal(err)
	}
	unit, err := os.ReadFile(filepath.Join(root, unitPath))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(unit, []byte("/usr/local")) {
		t.Errorf("the packaged unit still names /usr/local:\n%s", unit)
	}
	want := directives(strings.ReplaceAll(string(contrib), "/usr/local/bin/", "/usr/bin/"))
	got := directives(string(unit))
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("the packaged unit's directives differ from contrib/systemd's (paths aside):\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	keys := map[string]string{}
	for _, d := range got {
		if k, v, ok := strings.Cut(d, "="); ok {
			keys[k] = v
		}
	}
	if !strings.HasPrefix(keys["ExecStart"], "/usr/bin/paddockd serve") {
		t.Errorf("ExecStart=%s", keys["ExecStart"])
	}
	users, err := os.ReadFile(filepath.Join(root, "usr/lib/sysusers.d/paddock.conf"))
	if err != nil {
		t.Fatal(err)
	}
	if u := regexp.MustCompile(`(?m)^u\s+(\S+)\s+-\s+"[^"]*"\s+(\S+)\s+/usr/sbin/nologin$`).FindStringSubmatch(string(users)); u == nil || u[1] != keys["User"] || u[2] != varLib {
		t.Errorf("sysusers.d makes %q, want the unit's User=%s with home %s", u, keys["User"], varLib)
	}
	tmp, err := os.ReadFile(filepath.Join(root, "usr/lib/tmpfiles.d/paddock.conf"))
	if err != nil {
		t.Fatal(err)
	}
	dirs := map[string]string{}
	for _, d := range directives(string(tmp)) {
		if f := strings.Fields(d); len(f) >= 5 && f[0] == "d" {
			dirs[f[1]] = strings.Join(f[2:5], " ")
		}
	}
	home, _ := strings.CutPrefix(keys["Environment"], "PADDOCK_HOME=")
	for _, dir := range []string{keys["ReadWritePaths"], home} {
		if want := "0700 " + keys["User"] + " " + keys["Group"]; dirs[dir] != want {
			t.Errorf("tmpfiles.d makes %s %q, want %q (the unit writes it as %s)", dir, dirs[dir], want, keys["User"])
		}
	}
	if home != stateDir {
		t.Errorf("the unit's state is %q, want %s", home, stateDir)
	}
}

// checkCompletions: each shell's completion is what the binary at cli
// prints for it.
func checkCompletions(t *testing.T, root, cli string) {
	t.Helper()
	heads := map[string]string{"bash": "# bash completion V2 for paddock", "zsh": "#compdef paddock", "fish": "# fish completion for paddock"}
	for shell, p := range completions {
		file, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			t.Error(err)
			continue
		}
		if !bytes.HasPrefix(file, []byte(heads[shell])) {
			t.Errorf("/%s does not begin %q", p, heads[shell])
		}
		cmd := exec.Command(cli, "completion", shell)
		cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "PADDOCK_HOME="+t.TempDir(), "PADDOCK_NO_AUTOSTART=1")
		out, err := cmd.Output()
		if err != nil {
			t.Errorf("%s completion %s: %v", cli, shell, err)
		} else if !bytes.Equal(out, file) {
			t.Errorf("/%s is not what %s completion %s prints", p, cli, shell)
		}
	}
}

// checkDocs: README and docs/*.md as the repository has them, a
// changelog for this version, and a copyright file that names every
// module linked into the binaries and points to Debian's common licenses
// rather than holding their full texts.
func checkDocs(t *testing.T, root, version string) {
	t.Helper()
	doc := filepath.Join(root, "usr/share/doc/paddock")
	for p := range wantFiles(t) {
		rel, ok := strings.CutPrefix(p, "usr/share/doc/paddock/")
		if !ok || !strings.HasSuffix(rel, ".md") {
			continue
		}
		a, err1 := os.ReadFile(filepath.Join(repo, rel))
		b, err2 := os.ReadFile(filepath.Join(doc, rel))
		if err1 != nil || err2 != nil || !bytes.Equal(a, b) {
			t.Errorf("/%s is not the repository's %s (%v, %v)", p, rel, err1, err2)
		}
	}
	f, err := os.Open(filepath.Join(doc, "changelog.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	changelog, err := io.ReadAll(z)
	if err != nil || !bytes.HasPrefix(changelog, []byte("paddock ("+version+") ")) {
		t.Errorf("changelog.gz: %v\n%s", err, changelog)
	}
	copyright, err := os.ReadFile(filepath.Join(doc, "copyright"))
	if err != nil {
		t.Fatal(err)
	}
	mods := run(t, "go", "list", "-deps", "-f", "{{with .Module}}{{.Path}} {{.Version}}{{end}}", repo+"/cmd/paddock", repo+"/cmd/paddockd")
	for _, m := range strings.Split(strings.TrimSpace(mods), "\n") {
		if strings.Fields(m)[0] == "github.com/paddock-dev/paddock" {
			continue
		}
		if !bytes.Contains(copyright, []byte("----- "+m+"\n")) {
			t.Errorf("copyright does not name %s, which the binaries link", m)
		}
	}
	if bytes.Contains(copyright, []byte("TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION")) ||
		bytes.Contains(copyright, []byte("TERMS AND CONDITIONS FOR COPYING, DISTRIBUTION AND MODIFICATION")) {
		t.Error("copyright holds a full Apache or GPL text; Debian's policy wants /usr/share/common-licenses")
	}
}

// lintian runs Debian's lintian on the package where it is installed
// (.ci/run does not install it: it is large): no error may remain.
func lintian(t *testing.T, deb string) {
	t.Helper()
	if _, err := exec.LookPath("lintian"); err != nil {
		t.Log("lintian is not installed: the package is not linted")
		return
	}
	out, _ := exec.Command("lintian", "--pedantic", deb).CombinedOutput()
	for _, line := range strings.Split(string(out), "\n") {
		switch {
		case strings.HasPrefix(line, "E:"):
			t.Errorf("lintian: %s", line)
		case strings.HasPrefix(line, "W:"), strings.HasPrefix(line, "I:"), strings.HasPrefix(line, "P:"):
			t.Logf("lintian: %s", line)
		}
	}
}

// dpkg runs dpkg, waiting up to a minute for its lock if another
// process (an apt-get of someone else's) holds it.
func dpkg(args ...string) (string, error) {
	deadline := time.Now().Add(time.Minute)
	for {
		out, err := exec.Command("dpkg", args...).CombinedOutput()
		if err != nil && strings.Contains(string(out), "locked by another process") && time.Now().Before(deadline) {
			time.Sleep(time.Second)
			continue
		}
		if err != nil {
			return string(out), fmt.Errorf("dpkg %s: %w\n%s", strings.Join(args, " "), err, out)
		}
		return string(out), nil
	}
}

// account is a passwd or group entry, from getent (NSS, as dpkg's
// scripts and systemd see it); nil if there is none.
func account(t *testing.T, db, name string) []string {
	t.Helper()
	out, err := exec.Command("getent", db, name).Output()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 2 {
		return nil
	}
	if err != nil {
		t.Fatalf("getent %s %s: %v", db, name, err)
	}
	return strings.Split(strings.TrimSpace(string(out)), ":")
}

// known reports whether dpkg knows a package paddock in any state.
func known() (string, bool) {
	out, err := exec.Command("dpkg-query", "--show", "--showformat=${db:Status-Abbrev}", "paddock").Output()
	status := strings.TrimSpace(string(out))
	return status, err == nil && status != "" && !strings.HasPrefix(status, "un")
}

// TestInstall installs the package for real, as root: the maintainer
// scripts make the user and its state directory, the unit verifies, the
// installed binaries run (doctor as the daemon's user, version, the
// completions they ship), a removal keeps the state, and a purge (also
// when the test fails) leaves nothing but the system user, which Debian
// keeps and the test then removes if it made it.
func TestInstall(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root: dpkg -i installs into /usr and makes a system user")
	}
	deb := buildDeb(t)
	if status, ok := known(); ok {
		t.Skipf("dpkg knows a paddock package here (%s): the test would replace and purge it", status)
	}
	files := packagedFiles(t, deb)
	for p := range files {
		if _, err := os.Lstat("/" + p); err == nil {
			t.Skipf("/%s exists: the test would replace it, and its purge remove it", p)
		}
	}
	if _, err := os.Lstat(varLib); err == nil {
		t.Skipf("%s exists: the package's purge would remove it", varLib)
	}
	userExisted := account(t, "passwd", "paddock") != nil
	installed := false
	t.Cleanup(func() { purge(t, files, installed, userExisted) })

	start := time.Now()
	if _, err := dpkg("--install", deb); err != nil {
		t.Fatal(err)
	}
	installed = true
	t.Logf("dpkg --install took %v", time.Since(start).Round(time.Millisecond))
	if out, err := dpkg("--verify", "paddock"); err != nil || out != "" {
		t.Errorf("dpkg --verify: %v\n%s", err, out)
	}
	uid, gid := checkAccount(t)
	checkStateDirs(t, uid, gid)
	verifyUnit(t)
	enable(t)
	doctor(t, uid, gid)
	ver := control(t, deb)["Version"]
	for _, b := range []string{"/usr/bin/paddock", "/usr/bin/paddockd"} {
		if v := versionOf(t, b); v != ver {
			t.Errorf("%s version says %q, the package %q", b, v, ver)
		}
	}
	checkCompletions(t, "/", "/usr/bin/paddock")
	cmd := exec.Command("bash", "-c", "source /"+completions["bash"]+" && complete -p paddock")
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "__start_paddock") {
		t.Errorf("bash does not take the installed completion: %v\n%s", err, out)
	}
	removeKeepsState(t)
}

// checkAccount: sysusers made paddock a system user and group, at home in
// /var/lib/paddock with no login shell.
func checkAccount(t *testing.T) (uid, gid int) {
	t.Helper()
	u := account(t, "passwd", "paddock")
	if u == nil || len(u) != 7 {
		t.Fatalf("no user paddock after the install: %q", u)
	}
	uid, err1 := strconv.Atoi(u[2])
	gid, err2 := strconv.Atoi(u[3])
	if err1 != nil || err2 != nil || uid == 0 || uid >= 1000 || u[5] != varLib || u[6] != "/usr/sbin/nologin" {
		t.Errorf("user paddock is %q, want a system user (uid below 1000) at home in %s with /usr/sbin/nologin", u, varLib)
	}
	if g := account(t, "group", "paddock"); g == nil || g[2] != strconv.Itoa(gid) {
		t.Errorf("group paddock is %q, want gid %d", g, gid)
	}
	return uid, gid
}

// checkStateDirs: tmpfiles made the home and state directories, the
// daemon's user's alone.
func checkStateDirs(t *testing.T, uid, gid int) {
	t.Helper()
	for _, d := range []string{varLib, stateDir} {
		fi, err := os.Stat(d)
		if err != nil {
			t.Errorf("no state directory: %v", err)
			continue
		}
		st := fi.Sys().(*syscall.Stat_t)
		if !fi.IsDir() || fi.Mode().Perm() != 0o700 || int(st.Uid) != uid || int(st.Gid) != gid {
			t.Errorf("%s is %v %d:%d, want a directory 0700 of %d:%d", d, fi.Mode(), st.Uid, st.Gid, uid, gid)
		}
	}
}

// systemdVersion is the installed systemd's version (systemctl --version).
func systemdVersion(t *testing.T) int {
	t.Helper()
	f := strings.Fields(run(t, "systemctl", "--version"))
	if len(f) < 2 || f[0] != "systemd" {
		t.Fatalf("systemctl --version: %q", f)
	}
	v, err := strconv.Atoi(f[1])
	if err != nil {
		t.Fatalf("systemctl --version: %v", err)
	}
	return v
}

// verifyUnit runs systemd-analyze verify on the installed unit: it loads
// it offline (no running systemd needed), checks every directive, that
// ExecStart's binary is there and runnable, and the [Install] target. It
// may say nothing but that systemd before 254 does not know
// DelegateSubgroup= (the daemon then moves itself to its leaf).
func verifyUnit(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		testenv.Need(t, "no systemd-analyze: the unit cannot be verified")
	}
	old := systemdVersion(t) < 254
	cmd := exec.Command("systemd-analyze", "verify", "/"+unitPath)
	cmd.Dir = "/"
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if line == "" || old && strings.Contains(line, "Unknown key 'DelegateSubgroup' in section [Service]") ||
			old && strings.Contains(line, "Unknown key name 'DelegateSubgroup'") {
			continue
		}
		t.Errorf("systemd-analyze verify says: %s", line)
	}
}

// The link systemctl enable makes, and deb-systemd-helper's state.
var (
	wantsLink = "/etc/systemd/system/multi-user.target.wants/paddock.service"
	dshState  = []string{
		"/var/lib/systemd/deb-systemd-helper-enabled/paddock.service.dsh-also",
		"/var/lib/systemd/deb-systemd-helper-enabled/multi-user.target.wants/paddock.service",
	}
)

// enable: the install left the unit disabled; the operator enables it
// (its purge must remove the link).
func enable(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("systemctl"); err != nil {
		testenv.Need(t, "no systemctl: the unit cannot be enabled")
	}
	if _, err := os.Lstat(wantsLink); err == nil {
		t.Errorf("the install enabled paddock.service (%s); it should leave that to the operator", wantsLink)
	}
	if out, err := exec.Command("systemctl", "enable", "paddock.service").CombinedOutput(); err != nil {
		t.Errorf("systemctl enable: %v\n%s", err, out)
	}
	if _, err := os.Lstat(wantsLink); err != nil {
		t.Errorf("systemctl enable made no link: %v", err)
	}
}

// doctor runs the installed paddock doctor as the daemon's user with the
// unit's state directory: the CLI hands it to paddockd beside it, which
// checks the state directory (its owner and mode), git, the user and the
// sandbox, and runs /bin/true in it.
func doctor(t *testing.T, uid, gid int) {
	t.Helper()
	cmd := exec.Command("/usr/bin/paddock", "doctor", "--json")
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + varLib, "PADDOCK_HOME=" + stateDir, "PADDOCK_NO_AUTOSTART=1"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var ee *exec.ExitError
	if err != nil && !(errors.As(err, &ee) && ee.ExitCode() == 1) { // 1: a check failed
		t.Fatalf("paddock doctor: %v\n%s%s", err, out, stderr.Bytes())
	}
	var rep struct {
		Process struct {
			Role string
			UID  int
		}
		Checks []struct{ Name, Status, Detail string }
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("paddock doctor --json: %v\n%s%s", err, out, stderr.Bytes())
	}
	if rep.Process.Role != "cli" || rep.Process.UID != uid {
		t.Errorf("doctor describes %+v, want the CLI's process as uid %d", rep.Process, uid)
	}
	checks := map[string]string{}
	for _, c := range rep.Checks {
		checks[c.Name] = c.Status + ": " + c.Detail
		t.Logf("doctor: %-16s %s: %s", c.Name, c.Status, c.Detail)
	}
	for name, want := range map[string]string{"state directory": "ok: " + stateDir, "git": "ok: git ", "user": "ok: uid " + strconv.Itoa(uid)} {
		if !strings.HasPrefix(checks[name], want) {
			t.Errorf("doctor's %s: %q, want %q…", name, checks[name], want)
		}
	}
	if _, ok := checks["sandbox"]; !ok {
		t.Errorf("doctor ran no sandbox check: %v", checks)
	}
}

// versionOf is what an installed binary's version --json says.
func versionOf(t *testing.T, bin string) string {
	t.Helper()
	cmd := exec.Command(bin, "version", "--json")
	cmd.Env = append(os.Environ(), "PADDOCK_HOME="+t.TempDir(), "PADDOCK_NO_AUTOSTART=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s version --json: %v", bin, err)
	}
	var v struct{ Version string }
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("%s version --json: %v\n%s", bin, err, out)
	}
	return v.Version
}

// removeKeepsState: dpkg --remove takes the binaries and keeps the state
// (here a paddock.toml of the operator's) and the unit's enabling.
func removeKeepsState(t *testing.T) {
	t.Helper()
	conf := filepath.Join(stateDir, "paddock.toml")
	if err := os.WriteFile(conf, []byte("log_level = \"info\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := dpkg("--remove", "paddock"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("/usr/bin/paddockd"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("/usr/bin/paddockd after dpkg --remove: %v", err)
	}
	if _, err := os.Stat(conf); err != nil {
		t.Errorf("dpkg --remove took the state: %v", err)
	}
	if _, err := os.Lstat(wantsLink); err != nil {
		t.Errorf("dpkg --remove took the unit's enabling: %v", err)
	}
}

// purge runs dpkg --purge and checks nothing of the package is left: its
// files, its state, the unit's enabling and deb-systemd-helper's record
// of it. The system user stays (Debian keeps system users); the test
// removes it if it made it, leaving the machine as it found it.
func purge(t *testing.T, files map[string][2]string, installed, userExisted bool) {
	if _, err := dpkg("--purge", "paddock"); err != nil {
		t.Error(err)
	}
	if status, ok := known(); ok {
		t.Errorf("dpkg still knows paddock after the purge: %s", status)
	}
	left := append([]string{varLib, "/usr/share/doc/paddock", wantsLink}, dshState...)
	for p := range files {
		left = append(left, "/"+p)
	}
	sort.Strings(left)
	for _, p := range left {
		if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s is left after the purge (%v)", p, err)
		}
	}
	if userExisted {
		return
	}
	if installed && account(t, "passwd", "paddock") == nil {
		t.Error("the purge removed the system user paddock; Debian keeps system users")
	}
	if account(t, "passwd", "paddock") != nil {
		if out, err := exec.Command("userdel", "paddock").CombinedOutput(); err != nil {
			t.Errorf("userdel paddock: %v\n%s", err, out)
		}
	}
	if account(t, "group", "paddock") != nil {
		if out, err := exec.Command("groupdel", "paddock").CombinedOutput(); err != nil {
			t.Errorf("groupdel paddock: %v\n%s", err, out)
		}
	}
	if account(t, "passwd", "paddock") != nil || account(t, "group", "paddock") != nil {
		t.Error("the user or group paddock the test made is still there")
	}
}
