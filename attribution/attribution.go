// Package attribution is the lint that runs when a change set is submitted:
// it refuses text that credits a model or a tool with the work (commit
// trailers, "generated with" lines, model identifiers in code comments),
// because the change is submitted, approved and committed by people. Each
// rule can be allowed per project by its name.
package attribution

import (
	"regexp"
	"strconv"
	"strings"
)

// Rule is one pattern the lint looks for in added lines.
type Rule struct {
	Name string
	re   *regexp.Regexp
	// comment: the match counts only after a comment marker on its line.
	comment bool
}

const tools = `claude|anthropic|openai|chatgpt|gpt-?\d|copilot|codex|gemini|cursor|devin|aider|windsurf|codeium|tabnine|amazon q|llama|mistral`

// Rules are the lint's rules, in the order they are checked.
var Rules = []Rule{
	{Name: "co-author-trailer", re: regexp.MustCompile(`(?i)^\s*co-authored-by:.*\b(` + tools + `)`)},
	{Name: "generated-with", re: regexp.MustCompile(`(?i)\b(generated|written|created|authored)\s+(with|by|using)\s+\[?(` + tools + `)`)},
	{Name: "robot-generated", re: regexp.MustCompile(`🤖`)},
	{Name: "model-identifier", comment: true, re: regexp.MustCompile(
		`(?i)\b(claude-(?:[0-9]|opus|sonnet|haiku|instant)[\w.-]*|gpt-(?:3\.5|4|4o|5)[\w.-]*|o[134]-(?:preview|mini|pro)[\w.-]*|gemini-(?:[0-9]|pro|ultra|flash)[\w.-]*)\b`)},
}

var commentMarker = regexp.MustCompile(`(//|#|/\*|^\s*\*|<!--|^\s*--|;;|%)`)

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
	allowed := map[string]bool{}
	for _, a := range allow {
		allowed[a] = true
	}
	var hits []Hit
	check := func(file string, line int, text string) {
		for _, r := range Rules {
			if allowed[r.Name] {
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
			hits = append(hits, Hit{File: file, Line: line, Rule: r.Name, Text: strings.TrimSpace(text)})
			return
		}
	}
	file, line := "", 0
	for _, l := range strings.Split(diff, "\n") {
		switch {
		case strings.HasPrefix(l, "+++ "):
			file = strings.TrimPrefix(strings.TrimPrefix(l, "+++ "), "b/")
		case strings.HasPrefix(l, "@@ "):
			line = hunkStart(l)
		case strings.HasPrefix(l, "+"):
			check(file, line, l[1:])
			line++
		case strings.HasPrefix(l, " "):
			line++
		}
	}
	for i, l := range strings.Split(message, "\n") {
		check("(commit message)", i+1, l)
	}
	return hits
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
