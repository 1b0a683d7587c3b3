// Package attribution is the lint that runs when a change set is submitted:
// it refuses text that credits a model or a tool with the work (commit
// trailers, "generated with" lines, model identifiers in code comments),
// because the change is submitted, approved and committed by people. Each
// rule can be allowed per project by its name.
package attribution

import (
	"bufio"
	"io"
	"strconv"
	"strings"

	"github.com/paddock-dev/paddock/internal/lazyre"
)

// Rule is one pattern the lint looks for in added lines.
type Rule struct {
	Name string
	re   *lazyre.Regexp
	// comment: the match counts only after a comment marker on its line.
	comment bool
	// lits: the rule cannot match an ASCII line unless, for each group,
	// one of its strings occurs in it, in lower case. A substring scan
	// skips the regular expression on almost every line.
	lits [][]string
}

const tools = `claude|anthropic|openai|chatgpt|gpt-?\d|copilot|codex|gemini|cursor|devin|aider|windsurf|codeium|tabnine|amazon q|llama|mistral`

// Rules are the lint's rules, in the order they are checked.
var Rules = []Rule{
	{Name: "co-author-trailer", re: lazyre.New(`(?i)^\s*co-authored-by:.*\b(` + tools + `)`), lits: [][]string{{"co-authored-by:"}, toolNames}},
	{Name: "generated-with", re: lazyre.New(`(?i)\b(generated|written|created|authored)\s+(with|by|using)\s+\[?(` + tools + `)`),
		lits: [][]string{{"generated", "written", "created", "authored"}, toolNames}},
	{Name: "robot-generated", re: lazyre.New(`🤖`)},
	{Name: "model-identifier", comment: true, re: lazyre.New(
		`(?i)\b(claude-(?:[0-9]|opus|sonnet|haiku|instant)[\w.-]*|gpt-(?:3\.5|4|4o|5)[\w.-]*|o[134]-(?:preview|mini|pro)[\w.-]*|gemini-(?:[0-9]|pro|ultra|flash)[\w.-]*)\b`),
		lits: [][]string{{"claude-", "gpt-", "o1-", "o3-", "o4-", "gemini-"}}},
}

// toolNames are the literal heads of tools' alternatives.
var toolNames = []string{"claude", "anthropic", "openai", "chatgpt", "gpt", "copilot", "codex", "gemini", "cursor",
	"devin", "aider", "windsurf", "codeium", "tabnine", "amazon q", "llama", "mistral"}

// mayMatch reports whether r can match text; lower is text in lower case,
// or "" when text is not all ASCII (Unicode case folding matches letters
// such as U+212A to ASCII ones that lower-casing does not produce).
func (r *Rule) mayMatch(text, lower string) bool {
	if lower == "" {
		return true
	}
	for _, group := range r.lits {
		found := false
		for _, l := range group {
			if strings.Contains(lower, l) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// asciiLower is s in lower case, or "" if s is not all ASCII.
func asciiLower(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return ""
		}
	}
	return strings.ToLower(s)
}

var commentMarker = lazyre.New(`(//|#|/\*|^\s*\*|<!--|^\s*--|;;|%)`)

// Hit is one line the lint refuses.
type Hit struct {
	File string `json:"file"`
	Line int    `json:"line"`
	Rule string `json:"rule"`
	Text string `json:"text"`
}

// Check scans the lines a unified diff adds, and a commit message if any,
// and returns what the rules not in allow find.
func Check(diff, message string, allow []string) []Hit {
	l := newLint(allow)
	l.diff(bufio.NewReader(strings.NewReader(diff)))
	for i, line := range strings.Split(message, "\n") {
		l.check("(commit message)", i+1, line)
	}
	return l.hits
}

// CheckDiff is Check for a diff read as a stream, which never has to fit
// in memory: a line longer than MaxLine is checked on its first MaxLine
// bytes.
func CheckDiff(diff io.Reader, allow []string) ([]Hit, error) {
	l := newLint(allow)
	err := l.diff(bufio.NewReaderSize(diff, MaxLine))
	return l.hits, err
}

// MaxLine is how much of one line CheckDiff looks at.
const MaxLine = 64 << 10

type lint struct {
	allowed map[string]bool
	hits    []Hit
}

func newLint(allow []string) *lint {
	l := &lint{allowed: map[string]bool{}}
	for _, a := range allow {
		l.allowed[a] = true
	}
	return l
}

func (l *lint) check(file string, line int, text string) {
	lower := asciiLower(text)
	for _, r := range Rules {
		if l.allowed[r.Name] || !r.mayMatch(text, lower) {
			continue
		}
		loc := r.re.FindStringIndex(text)
		if loc == nil {
			continue
		}
		if r.comment {
			m := commentMarker.FindStringIndex(text)
			if m == nil || m[0] > loc[0] {
				continue
			}
		}
		if len(text) > 200 {
			text = text[:200] + "…"
		}
		l.hits = append(l.hits, Hit{File: file, Line: line, Rule: r.Name, Text: strings.TrimSpace(text)})
		return
	}
}

// diff checks the added lines of a unified diff.
func (l *lint) diff(r *bufio.Reader) error {
	file, line := "", 0
	for {
		b, err := r.ReadSlice('\n')
		var s string
		if len(b) > 0 && (b[0] == '+' || b[0] == '@') {
			// Only lines that count; the rest (context-free headers,
			// removed lines, a binary patch's data) are never copied.
			s = strings.TrimSuffix(string(b), "\n")
		}
		for err == bufio.ErrBufferFull { // the head is checked, the rest skipped
			_, err = r.ReadSlice('\n')
		}
		if len(s) > 0 {
			switch {
			case strings.HasPrefix(s, "+++ "):
				file = strings.TrimPrefix(strings.TrimPrefix(s, "+++ "), "b/")
			case strings.HasPrefix(s, "@@ "):
				line = hunkStart(s)
			case strings.HasPrefix(s, "+"):
				l.check(file, line, s[1:])
				line++
			}
		} else if len(b) > 0 && b[0] == ' ' {
			line++ // a context line
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// hunkStart reads the new-file start line of "@@ -a,b +c,d @@".
func hunkStart(h string) int {
	i := strings.Index(h, " +")
	if i < 0 {
		return 0
	}
	rest := h[i+2:]
	if j := strings.IndexAny(rest, ", "); j >= 0 {
		rest = rest[:j]
	}
	n, _ := strconv.Atoi(rest)
	return n
}

// Names lists the rules' names.
func Names() []string {
	var out []string
	for _, r := range Rules {
		out = append(out, r.Name)
	}
	return out
}
