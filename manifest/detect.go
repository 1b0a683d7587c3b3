package manifest

import (
	"path"
	"slices"
	"sort"
	"strings"
)

// knownNames are the root files Detect probes for; the names detection
// reads anywhere in a tree are these base names (and the extensions in
// knownExts).
var knownNames = map[string]bool{
	"go.mod": true, "go.work": true,
	"package.json": true, "package-lock.json": true, "npm-shrinkwrap.json": true, "pnpm-lock.yaml": true,
	"pnpm-workspace.yaml": true, "yarn.lock": true, "bun.lockb": true, "bun.lock": true,
	".nvmrc": true, ".node-version": true,
	"pyproject.toml": true, "setup.py": true, "requirements.txt": true, "tox.ini": true,
	"uv.lock": true, "poetry.lock": true, ".python-version": true, "ruff.toml": true, ".ruff.toml": true,
	"Cargo.toml": true, "rust-toolchain": true, "rust-toolchain.toml": true,
	"global.json": true,
	"pom.xml":     true, "mvnw": true, ".mvn/wrapper/maven-wrapper.properties": true,
	"build.gradle": true, "build.gradle.kts": true, "settings.gradle": true, "settings.gradle.kts": true,
	"gradlew": true, "gradle/wrapper/gradle-wrapper.properties": true,
	"GNUmakefile": true, "makefile": true, "Makefile": true,
}

var knownExts = []string{".sln", ".slnx", ".csproj", ".fsproj", ".vbproj"}

// wrapperDirs are the directories a wrapper's properties live in below
// the directory they belong to.
var wrapperDirs = map[string]string{
	"maven-wrapper.properties":  ".mvn/wrapper",
	"gradle-wrapper.properties": "gradle/wrapper",
}

// skipDirs hold other people's code, build output or fixtures: a
// project file below one is not a component. Hidden directories (.git,
// .venv, .tox, .paddock, …) are skipped too.
var skipDirs = map[string]bool{
	"node_modules": true, "bower_components": true, "jspm_packages": true,
	"vendor": true, "third_party": true, "third-party": true, "thirdparty": true,
	"testdata": true, "fixtures": true, "__fixtures__": true,
	"target": true, "site-packages": true, "__pycache__": true, "venv": true,
}

// index is the part of a tree detection looks at, found in one pass.
type index struct {
	t     Tree
	files map[string]bool     // every interesting path
	dirs  map[string][]string // base name (or extension) → paths, sorted
}

func newIndex(t Tree) *index {
	ix := &index{t: t, files: map[string]bool{}, dirs: map[string][]string{}}
	for _, p := range t.Files() {
		base := p[strings.LastIndexByte(p, '/')+1:]
		key := base
		if !knownNames[base] {
			ext := path.Ext(base)
			if _, ok := wrapperDirs[base]; ok {
				key = base
			} else if slices.Contains(knownExts, ext) {
				key = ext
			} else {
				continue
			}
		}
		owner := path.Dir(p)
		if w, ok := wrapperDirs[base]; ok {
			if owner != w && !strings.HasSuffix(owner, "/"+w) {
				continue
			}
			owner = strings.TrimSuffix(strings.TrimSuffix(owner, w), "/")
		}
		if owner == "." {
			owner = ""
		}
		if skipped(owner) {
			continue
		}
		ix.files[p] = true
		ix.dirs[key] = append(ix.dirs[key], p)
	}
	for _, ps := range ix.dirs {
		sort.Strings(ps)
	}
	return ix
}

func skipped(dir string) bool {
	for dir != "" {
		seg, rest, _ := strings.Cut(dir, "/")
		if skipDirs[seg] || strings.HasPrefix(seg, ".") {
			return true
		}
		dir = rest
	}
	return false
}

func (ix *index) has(p string) bool { return ix.files[p] }

func (ix *index) read(p string) ([]byte, bool) {
	if !ix.files[p] {
		return nil, false
	}
	return ix.t.ReadFile(p)
}

// named lists the paths with that base name (or knownExts extension).
func (ix *index) named(name string) []string { return ix.dirs[name] }

// nearest finds name in dir or the closest directory above it, as tools
// that search upward for their settings do (nvm, pyenv, rustup, dotnet).
func (ix *index) nearest(dir, name string) (string, bool) {
	for {
		p := join(dir, name)
		if ix.files[p] {
			return p, true
		}
		if dir == "" {
			return "", false
		}
		dir = parent(dir)
	}
}

// join is path.Join where "" is the root.
func join(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

func parent(dir string) string {
	if i := strings.LastIndexByte(dir, '/'); i >= 0 {
		return dir[:i]
	}
	return ""
}

func dirOf(p string) string { return parent(p) }

// within reports whether dir is root or below it.
func within(dir, root string) bool {
	return root == "" || dir == root || strings.HasPrefix(dir, root+"/")
}

// rel is dir relative to root (which holds it).
func rel(dir, root string) string {
	if root == "" {
		return dir
	}
	return strings.TrimPrefix(strings.TrimPrefix(dir, root), "/")
}

// detector builds a manifest from an index.
type detector struct {
	ix *index
	m  *Manifest
	// covered are directories a workspace root already covers, by ecosystem.
	covered map[string]map[string]bool
}

// DetectTree builds the manifest of the revision t holds.
func DetectTree(t Tree) *Manifest {
	d := &detector{ix: newIndex(t), m: &Manifest{Types: []string{}, Components: []Component{}, Files: map[string][]byte{}},
		covered: map[string]map[string]bool{}}
	d.golang()
	d.node()
	d.rust()
	d.python()
	d.dotnet()
	d.java()
	d.make() // last: it fills in what the others leave
	sort.SliceStable(d.m.Components, func(i, j int) bool {
		a, b := d.m.Components[i], d.m.Components[j]
		if a.Dir != b.Dir {
			return a.Dir < b.Dir
		}
		return ecoRank(a.Ecosystem) < ecoRank(b.Ecosystem)
	})
	for _, e := range ecosystems {
		for _, c := range d.m.Components {
			if c.Ecosystem == e {
				d.m.Types = append(d.m.Types, e)
				break
			}
		}
	}
	for name := range d.m.Files {
		d.m.Staged = append(d.m.Staged, name)
	}
	sort.Strings(d.m.Staged)
	return d.m
}

var shipsWithToolchain = map[string]bool{"gofmt": true, "clippy": true, "rustfmt": true}

var checkOrder = []string{CheckBuild, CheckLint, CheckTest, CheckFormatCheck}

func checkRank(name string) int { return slices.Index(checkOrder, name) }

func (d *detector) cover(eco, dir string) {
	if d.covered[eco] == nil {
		d.covered[eco] = map[string]bool{}
	}
	d.covered[eco][dir] = true
}

func (d *detector) isCovered(eco, dir string) bool { return d.covered[eco][dir] }

func (d *detector) add(c Component) {
	for i := range c.Checks {
		ch := &c.Checks[i]
		if ch.Adapter == "" {
			ch.Adapter = c.Adapter
		}
		// The adapter's own version, else the toolchain's the component
		// runs on (uv and python, cargo and rust), which also ships gofmt,
		// clippy and rustfmt; not ruff's or black's.
		if ch.Version == "" && len(c.Tools) > 0 && (ch.Adapter == c.Adapter || shipsWithToolchain[ch.Adapter]) {
			ch.Version = c.Tools[0].Version
		}
		for _, t := range c.Tools {
			if t.Name == ch.Adapter {
				ch.Version = t.Version
			}
		}
	}
	slices.SortStableFunc(c.Checks, func(a, b Check) int { return checkRank(a.Name) - checkRank(b.Name) })
	if c.Checks == nil {
		c.Checks = []Check{}
	}
	d.m.Components = append(d.m.Components, c)
}

// stage records a base file the commands read from StageDir and returns
// its staged path as seen from dir.
func (d *detector) stage(p string, content []byte, dir string) string {
	d.m.Files[p] = content
	return fromRoot(dir, path.Join(StageDir, p))
}
