package redact

import (
	"bytes"
	"regexp"
)

// shape is a well-known credential format, masked wherever it appears,
// declared or not.
type shape struct {
	name string
	re   *regexp.Regexp
	// keep: the first submatch (a header or key name) stays.
	keep bool
	// lits: the shape cannot match unless one of these occurs (in lower
	// case when fold is set). A fast substring scan skips the regular
	// expression on almost all output.
	lits []string
	fold bool
}

var privateKeyBlock = regexp.MustCompile(`-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z0-9 ]*PRIVATE KEY-----`)

// shapes are the credential formats every output is scanned for.
var shapes = []shape{
	{name: "private_key", re: privateKeyBlock, lits: []string{"PRIVATE KEY-----"}},
	{name: "aws_access_key", re: regexp.MustCompile(`\b(?:AKIA|ASIA|AGPA|AIDA|AROA)[0-9A-Z]{16}\b`), lits: []string{"AKIA", "ASIA", "AGPA", "AIDA", "AROA"}},
	{name: "aws_secret_key", re: regexp.MustCompile(`(?i)(aws_secret_access_key["']?\s*[:=]\s*["']?)[A-Za-z0-9/+=]{40}`), keep: true, lits: []string{"aws_secret_access_key"}, fold: true},
	{name: "github_token", re: regexp.MustCompile(`\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})\b`), lits: []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"}},
	{name: "gitlab_token", re: regexp.MustCompile(`\bglpat-[A-Za-z0-9_-]{20,}\b`), lits: []string{"glpat-"}},
	{name: "slack_token", re: regexp.MustCompile(`\bxox[abposr]-[A-Za-z0-9-]{10,}\b`), lits: []string{"xox"}},
	{name: "google_api_key", re: regexp.MustCompile(`\bAIza[0-9A-Za-z_-]{35}\b`), lits: []string{"AIza"}},
	{name: "api_key", re: regexp.MustCompile(`\bsk-(?:ant-|proj-)?[A-Za-z0-9_-]{20,}\b`), lits: []string{"sk-"}},
	{name: "jwt", re: regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}`), lits: []string{"eyJ"}},
	{name: "bearer", re: regexp.MustCompile(`(?i)(\bbearer\s+)[A-Za-z0-9._~+/-]{16,}=*`), keep: true, lits: []string{"bearer"}, fold: true},
}

// mayMatch reports whether one of s's literals occurs in b (or in lower,
// b in lower case, for a shape matched without regard to case; lower is nil
// when b is not all ASCII, since Unicode case folding matches letters such
// as U+017F to ASCII ones that lower-casing does not produce).
func (s *shape) mayMatch(b, lower []byte) bool {
	in := b
	if s.fold {
		if lower == nil {
			return true
		}
		in = lower
	}
	for _, l := range s.lits {
		if bytes.Contains(in, []byte(l)) {
			return true
		}
	}
	return false
}

// Shapes masks well-known credential shapes in b.
func Shapes(b []byte) []byte {
	lower := asciiLower(b)
	for i := range shapes {
		s := &shapes[i]
		if !s.mayMatch(b, lower) || !s.re.Match(b) {
			continue
		}
		mask := []byte("[REDACTED:" + s.name + "]")
		if s.keep {
			b = s.re.ReplaceAll(b, append([]byte("${1}"), mask...))
		} else {
			b = s.re.ReplaceAll(b, mask)
		}
		lower = asciiLower(b)
	}
	return b
}

// asciiLower is b in lower case, or nil if b holds any non-ASCII byte.
func asciiLower(b []byte) []byte {
	for _, c := range b {
		if c >= 0x80 {
			return nil
		}
	}
	return bytes.ToLower(b)
}
