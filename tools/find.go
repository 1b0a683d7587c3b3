package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"regexp"
	"regexp/syntax"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/bmatcuk/doublestar/v4"
	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/confine"
)

// Limits of the search tools.
const (
	DefaultLimit   = 1000
	MaxLimit       = 100000
	maxLineLen     = 500
	maxContext     = 10
	maxGrepFileLen = 32 << 20
)

func init() {
	register(&Tool{
		Name:        "stat",
		Description: "Describe a path: type, size, mode, modification time, link target.",
		Schema:      schema(`{"type":"object","additionalProperties":false,"required":["path"],"properties":{"path":{"type":"string","description":"path relative to the workspace root"}}}`),
		run:         runStat,
	})
	register(&Tool{
		Name:        "list",
		Description: "List a directory as a tree to a depth, with sizes. Ignored files (.gitignore) are left out unless include_ignored.",
		Schema: schema(`{"type":"object","additionalProperties":false,"properties":{
			"path":{"type":"string","default":".","description":"directory to list, relative to the workspace root"},
			"depth":{"type":"integer","minimum":1,"maximum":20,"default":2,"description":"how many levels below path to show"},
			"include_ignored":{"type":"boolean","description":"also list what .gitignore leaves out"},
			"limit":{"type":"integer","minimum":1,"maximum":100000,"default":1000,"description":"most entries to return; a cut answer says truncated"}}}`),
		run: runList,
	})
	register(&Tool{
		Name:        "glob",
		Description: "Find files whose path matches a pattern (** for any depth, * within a name, {a,b}, [abc]). Ignored files are left out unless include_ignored.",
		Schema: schema(`{"type":"object","additionalProperties":false,"required":["pattern"],"properties":{
			"pattern":{"type":"string","description":"such as **/*.go or src/*/test_*.py, relative to path"},
			"path":{"type":"string","default":".","description":"directory to search under, relative to the workspace root"},
			"include_ignored":{"type":"boolean","description":"also match what .gitignore leaves out"},
			"limit":{"type":"integer","minimum":1,"maximum":100000,"default":1000,"description":"most paths to return; a cut answer says truncated"}}}`),
		run: runGlob,
	})
	register(&Tool{
		Name: "grep",
		Description: "Search file contents with an RE2 regular expression, or a literal string. Binary files and " +
			"ignored files are skipped. Returns matching lines with optional context.",
		Schema: schema(`{"type":"object","additionalProperties":false,"required":["pattern"],"properties":{
			"pattern":{"type":"string","description":"an RE2 regular expression, or plain text with literal"},
			"literal":{"type":"boolean","description":"match the pattern as plain text"},
			"ignore_case":{"type":"boolean","description":"match regardless of case"},
			"path":{"type":"string","default":".","description":"directory to search under, relative to the workspace root"},
			"glob":{"type":"string","description":"only files whose path (relative to path) matches, such as **/*.go"},
			"context":{"type":"integer","minimum":0,"maximum":10,"description":"lines to show before and after each match"},
			"max_results":{"type":"integer","minimum":1,"maximum":100000,"default":200,"description":"most matching lines to return; a cut answer says truncated"},
			"include_ignored":{"type":"boolean","description":"also search what .gitignore leaves out"}}}`),
		run: runGrep,
	})
}

// StatResult is the answer of stat.
type StatResult struct {
	Path   string    `json:"path"`
	Type   string    `json:"type"` // file, dir, symlink, other
	Size   int64     `json:"size"`
	Mode   string    `json:"mode"`
	MTime  time.Time `json:"mtime"`
	Target string    `json:"link_target,omitempty"`
}

func fileType(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "file"
	case m.IsDir():
		return "dir"
	case m&fs.ModeSymlink != 0:
		return "symlink"
	}
	return "other"
}

func runStat(ctx context.Context, r *confine.Root, raw json.RawMessage) (any, int64, error) {
	var a struct {
		Path string `json:"path"`
	}
	if err := Decode("stat", raw, &a); err != nil {
		return nil, 0, err
	}
	at, err := r.Rel(a.Path)
	if err != nil {
		return nil, 0, err
	}
	fi, err := r.Lstat(at)
	if err != nil {
		return nil, 0, err
	}
	res := &StatResult{Path: a.Path, Type: fileType(fi.Mode()), Size: fi.Size(),
		Mode: fmt.Sprintf("%04o", fi.Mode().Perm()), MTime: fi.ModTime().UTC()}
	if res.Type == "symlink" {
		res.Target, _ = r.Readlink(at)
	}
	return res, 0, nil
}

// ListEntry is one line of list.
type ListEntry struct {
	Path string `json:"path"`
	Type string `json:"type"`
	Size int64  `json:"size,omitempty"`
}

// ListResult is the answer of list.
type ListResult struct {
	Path      string      `json:"path"`
	Entries   []ListEntry `json:"entries"`
	Truncated bool        `json:"truncated"`
}

func limitOf(n int) (int, error) {
	if n == 0 {
		return DefaultLimit, nil
	}
	if n < 0 || n > MaxLimit {
		return 0, paddock.Errorf(paddock.CodeBadRequest, "limit must be between 1 and %d", MaxLimit)
	}
	return n, nil
}

// dirArg is the directory an agent named (the root if none), which must be one.
func dirArg(r *confine.Root, p string) (confine.Path, error) {
	if p == "" {
		p = "."
	}
	dir, err := r.Rel(p)
	if err != nil {
		return confine.Path{}, err
	}
	fi, err := r.Stat(dir)
	if err != nil {
		return confine.Path{}, err
	}
	if !fi.IsDir() {
		return confine.Path{}, confine.Refuse(paddock.CodeBadRequest, confine.RuleNotRegular, p, "the path is not a directory", "")
	}
	return dir, nil
}

func runList(ctx context.Context, r *confine.Root, raw json.RawMessage) (any, int64, error) {
	var a struct {
		Path           string `json:"path"`
		Depth          int    `json:"depth"`
		IncludeIgnored bool   `json:"include_ignored"`
		Limit          int    `json:"limit"`
	}
	if err := Decode("list", raw, &a); err != nil {
		return nil, 0, err
	}
	limit, err := limitOf(a.Limit)
	if err != nil {
		return nil, 0, err
	}
	if a.Depth == 0 {
		a.Depth = 2
	}
	if a.Depth < 0 || a.Depth > 20 {
		return nil, 0, paddock.Errorf(paddock.CodeBadRequest, "list: depth must be between 1 and 20")
	}
	dir, err := dirArg(r, a.Path)
	if err != nil {
		return nil, 0, err
	}
	res := &ListResult{Path: dir.Given(), Entries: []ListEntry{}}
	err = walk(ctx, r, dir.Rel(), a.Depth, a.IncludeIgnored, func(e entry) error {
		if len(res.Entries) >= limit {
			res.Truncated = true
			return fs.SkipAll
		}
		le := ListEntry{Path: e.rel, Type: fileType(e.d.Type())}
		if le.Type == "file" {
			if fi, err := e.d.Info(); err == nil {
				le.Size = fi.Size()
			}
		}
		res.Entries = append(res.Entries, le)
		return nil
	})
	return res, 0, err
}

// GlobResult is the answer of glob.
type GlobResult struct {
	Matches   []string `json:"matches"`
	Truncated bool     `json:"truncated"`
}

func runGlob(ctx context.Context, r *confine.Root, raw json.RawMessage) (any, int64, error) {
	var a struct {
		Pattern        string `json:"pattern"`
		Path           string `json:"path"`
		IncludeIgnored bool   `json:"include_ignored"`
		Limit          int    `json:"limit"`
	}
	if err := Decode("glob", raw, &a); err != nil {
		return nil, 0, err
	}
	limit, err := limitOf(a.Limit)
	if err != nil {
		return nil, 0, err
	}
	if a.Pattern == "" || !doublestar.ValidatePattern(a.Pattern) {
		return nil, 0, paddock.Errorf(paddock.CodeBadRequest, "glob: invalid pattern %q", a.Pattern)
	}
	if err := patternInside("glob", "pattern", a.Pattern); err != nil {
		return nil, 0, err
	}
	dir, err := dirArg(r, a.Path)
	if err != nil {
		return nil, 0, err
	}
	rel := dir.Rel()
	res := &GlobResult{Matches: []string{}}
	err = walk(ctx, r, rel, -1, a.IncludeIgnored, func(e entry) error {
		if e.d.IsDir() {
			return nil
		}
		sub := e.rel
		if rel != "." {
			sub = strings.TrimPrefix(e.rel, rel+"/")
		}
		if ok, _ := doublestar.Match(a.Pattern, sub); ok {
			if len(res.Matches) >= limit {
				res.Truncated = true
				return fs.SkipAll
			}
			res.Matches = append(res.Matches, e.rel)
		}
		return nil
	})
	return res, 0, err
}

// GrepMatch is one matching line.
type GrepMatch struct {
	Path   string   `json:"path"`
	Line   int      `json:"line"`
	Text   string   `json:"text"`
	Before []string `json:"before,omitempty"`
	After  []string `json:"after,omitempty"`
}

// GrepResult is the answer of grep.
type GrepResult struct {
	Matches       []GrepMatch `json:"matches"`
	FilesSearched int         `json:"files_searched"`
	FilesMatched  int         `json:"files_matched"`
	Truncated     bool        `json:"truncated"`
}

type grepArgs struct {
	Pattern        string `json:"pattern"`
	Literal        bool   `json:"literal"`
	IgnoreCase     bool   `json:"ignore_case"`
	Path           string `json:"path"`
	Glob           string `json:"glob"`
	Context        int    `json:"context"`
	MaxResults     int    `json:"max_results"`
	IncludeIgnored bool   `json:"include_ignored"`
}

// matcher finds matching lines. For a regular expression it keeps a literal
// every match must contain (as ripgrep does), so that most files and lines are
// rejected by a fast substring search before the regexp runs.
type matcher struct {
	literal []byte // literal mode: the text; regexp mode: a required substring, or nil
	fold    bool   // literal mode, case-insensitive: literal is lower-case
	re      *regexp.Regexp
}

func (m *matcher) match(line []byte) bool {
	if m.re != nil {
		if m.literal != nil && !bytes.Contains(line, m.literal) {
			return false
		}
		return m.re.Match(line)
	}
	if m.fold {
		return bytes.Contains(bytes.ToLower(line), m.literal)
	}
	return bytes.Contains(line, m.literal)
}

// quick reports whether the whole file can contain a match at all.
func (m *matcher) quick(b []byte) bool {
	switch {
	case m.re != nil:
		return m.literal == nil || bytes.Contains(b, m.literal)
	case m.fold:
		return bytes.Contains(bytes.ToLower(b), m.literal)
	}
	return bytes.Contains(b, m.literal)
}

// requiredLiteral returns the longest case-sensitive literal that every match
// of re must contain, or nil when there is none.
func requiredLiteral(expr string) []byte {
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return nil
	}
	re = re.Simplify()
	lit := func(r *syntax.Regexp) []byte {
		if r.Op == syntax.OpLiteral && r.Flags&syntax.FoldCase == 0 {
			return []byte(string(r.Rune))
		}
		return nil
	}
	if l := lit(re); l != nil {
		return l
	}
	var best []byte
	if re.Op == syntax.OpConcat {
		for _, sub := range re.Sub {
			if l := lit(sub); len(l) > len(best) {
				best = l
			}
		}
	}
	return best
}

func runGrep(ctx context.Context, r *confine.Root, raw json.RawMessage) (any, int64, error) {
	var a grepArgs
	if err := Decode("grep", raw, &a); err != nil {
		return nil, 0, err
	}
	if a.MaxResults == 0 {
		a.MaxResults = 200
	}
	if a.Pattern == "" || a.MaxResults < 0 || a.MaxResults > MaxLimit || a.Context < 0 || a.Context > maxContext {
		return nil, 0, paddock.Errorf(paddock.CodeBadRequest, "grep: pattern must be non-empty, max_results 1-%d, context 0-%d", MaxLimit, maxContext)
	}
	if a.Glob != "" && !doublestar.ValidatePattern(a.Glob) {
		return nil, 0, paddock.Errorf(paddock.CodeBadRequest, "grep: invalid glob %q", a.Glob)
	}
	if err := patternInside("grep", "glob", a.Glob); err != nil {
		return nil, 0, err
	}
	m := &matcher{}
	switch {
	case a.Literal && !a.IgnoreCase:
		m.literal = []byte(a.Pattern)
	case a.Literal:
		m.literal, m.fold = bytes.ToLower([]byte(a.Pattern)), true
	default:
		expr := a.Pattern
		if a.IgnoreCase {
			expr = "(?i)" + expr
		}
		if _, err := regexp.Compile(expr); err != nil {
			return nil, 0, paddock.Errorf(paddock.CodeBadRequest, "grep: invalid regular expression: %v", err)
		}
		m.re = regexp.MustCompile(expr)
		m.literal = requiredLiteral(expr)
	}
	dir, err := dirArg(r, a.Path)
	if err != nil {
		return nil, 0, err
	}
	rel := dir.Rel()

	type job struct {
		rel  string
		dir  *confine.Root
		name string
		done func()
	}
	type fileResult struct {
		rel     string
		matches []GrepMatch
		bytes   int64
	}
	jobs := make(chan job, 256)
	results := make(chan fileResult, 256)
	var wg sync.WaitGroup
	for i := 0; i < runtime.GOMAXPROCS(0); i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				// One more than asked, so the answer knows it was cut.
				ms, n := grepFile(j.dir, j.name, j.rel, m, a.Context, a.MaxResults+1)
				j.done()
				results <- fileResult{j.rel, ms, n}
			}
		}()
	}
	res := &GrepResult{Matches: []GrepMatch{}}
	var all []fileResult
	var total int64
	done := make(chan struct{})
	go func() {
		for fr := range results {
			res.FilesSearched++
			total += fr.bytes
			if len(fr.matches) > 0 {
				all = append(all, fr)
			}
		}
		close(done)
	}()
	walkErr := walk(ctx, r, rel, -1, a.IncludeIgnored, func(e entry) error {
		if !e.d.Type().IsRegular() {
			return nil
		}
		if a.Glob != "" {
			sub := e.rel
			if rel != "." {
				sub = strings.TrimPrefix(e.rel, rel+"/")
			}
			if ok, _ := doublestar.Match(a.Glob, sub); !ok {
				return nil
			}
		}
		// The workers read the file relative to its directory, which the
		// walk keeps open until they are done with it.
		jobs <- job{rel: e.rel, dir: e.dir, name: e.d.Name(), done: e.hold()}
		return nil
	})
	close(jobs)
	wg.Wait()
	close(results)
	<-done
	if walkErr != nil {
		return nil, 0, walkErr
	}
	sort.Slice(all, func(i, j int) bool { return all[i].rel < all[j].rel })
	for _, fr := range all {
		res.FilesMatched++
		for _, mt := range fr.matches {
			if len(res.Matches) >= a.MaxResults {
				res.Truncated = true
				break
			}
			res.Matches = append(res.Matches, mt)
		}
	}
	return res, total, nil
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 64<<10); return &b }}

// grepFile searches one file; binary and oversized files are skipped.
func grepFile(dir *confine.Root, name, rel string, m *matcher, ctxLines, max int) ([]GrepMatch, int64) {
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	b, skipped, err := dir.ReadEntry(name, maxGrepFileLen, *bp)
	if err != nil || skipped {
		return nil, 0
	}
	*bp = b[:0]
	n := len(b)
	head := b
	if len(head) > sniffLen {
		head = head[:sniffLen]
	}
	if bytes.IndexByte(head, 0) >= 0 || !m.quick(b) {
		return nil, int64(n)
	}
	var out []GrepMatch
	var starts []int // line starts, kept only when context is wanted
	lineNo := 0
	for pos := 0; pos < len(b) && len(out) < max; {
		end := bytes.IndexByte(b[pos:], '\n')
		if end < 0 {
			end = len(b)
		} else {
			end += pos
		}
		lineNo++
		if ctxLines > 0 {
			starts = append(starts, pos)
		}
		if m.match(b[pos:end]) {
			out = append(out, GrepMatch{Path: rel, Line: lineNo, Text: clip(b[pos:end])})
		}
		pos = end + 1
	}
	if ctxLines > 0 && len(out) > 0 {
		lines := make([][]byte, len(starts))
		for i, st := range starts {
			e := len(b)
			if i+1 < len(starts) {
				e = starts[i+1] - 1
			}
			lines[i] = bytes.TrimSuffix(b[st:e], []byte("\n"))
		}
		for k := range out {
			i := out[k].Line - 1
			for j := max0(i - ctxLines); j < i; j++ {
				out[k].Before = append(out[k].Before, clip(lines[j]))
			}
			for j := i + 1; j < len(lines) && j <= i+ctxLines; j++ {
				out[k].After = append(out[k].After, clip(lines[j]))
			}
		}
	}
	return out, int64(n)
}

func max0(n int) int {
	if n < 0 {
		return 0
	}
	return n
}

func clip(b []byte) string {
	if len(b) > maxLineLen {
		return string(b[:maxLineLen]) + "…"
	}
	return string(b)
}

// patternInside refuses a pattern that names what is outside the
// workspace (an absolute path, or a .. component): it could never match
// inside, and an empty answer would read as "nothing there" rather than
// "not yours to look at".
func patternInside(tool, arg, pattern string) error {
	leaves := strings.HasPrefix(pattern, "/")
	for _, part := range strings.Split(pattern, "/") {
		leaves = leaves || part == ".."
	}
	if !leaves {
		return nil
	}
	return paddock.Errorf(paddock.CodeForbidden, "%s: %s %q leads out of the workspace (an absolute path or ..); patterns are relative to path, inside the workspace", tool, arg, pattern).
		WithRule(confine.RuleOutside).WithDetail(arg, pattern).WithDetail("hint", "name a directory inside the workspace with path, and a pattern relative to it")
}
