package redact

import (
	"regexp"
)

// shape is a well-known credential format, masked wherever it appears,
// declared or not.
type shape struct {
	name string
	re   *regexp.Regexp
	// keep: the first submatch (a header or key name) stays.
	keep bool
}

var privateKeyBlock = regexp.MustCompile(`-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z0-9 ]*PRIVATE KEY-----`)

// shapes are the credential formats every output is scanned for.
var shapes = []shape{
	{name: "private_key", re: privateKeyBlock},
	{name: "aws_access_key", re: regexp.MustCompile(`\b(?:AKIA|ASIA|AGPA|AIDA|AROA)[0-9A-Z]{16}\b`)},
	{name: "aws_secret_key", re: regexp.MustCompile(`(?i)(aws_secret_access_key["']?\s*[:=]\s*["']?)[A-Za-z0-9/+=]{40}`), keep: true},
	{name: "github_token", re: regexp.MustCompile(`\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})\b`)},
	{name: "gitlab_token", re: regexp.MustCompile(`\bglpat-[A-Za-z0-9_-]{20,}\b`)},
	{name: "slack_token", re: regexp.MustCompile(`\bxox[abposr]-[A-Za-z0-9-]{10,}\b`)},
	{name: "google_api_key", re: regexp.MustCompile(`\bAIza[0-9A-Za-z_-]{35}\b`)},
	{name: "api_key", re: regexp.MustCompile(`\bsk-(?:ant-|proj-)?[A-Za-z0-9_-]{20,}\b`)},
	{name: "jwt", re: regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}`)},
	{name: "bearer", re: regexp.MustCompile(`(?i)(\bbearer\s+)[A-Za-z0-9._~+/-]{16,}=*`), keep: true},
}

// Shapes masks well-known credential shapes in b.
func Shapes(b []byte) []byte {
	for _, s := range shapes {
		if !s.re.Match(b) {
			continue
		}
		mask := []byte("[REDACTED:" + s.name + "]")
		if s.keep {
			b = s.re.ReplaceAll(b, append([]byte("${1}"), mask...))
		} else {
			b = s.re.ReplaceAll(b, mask)
		}
	}
	return b
}
