// Package lazyre holds regular expressions that are compiled on first use.
//
// A package-level regexp.MustCompile runs at every start of the binary,
// whatever the command: paddock's CLI is also its daemon and its sandbox
// helper, so `paddock version` used to compile the credential shapes and
// the attribution rules it never uses, most of its start-up. New costs
// nothing until the expression is used.
//
// An invalid expression panics at its first use instead of at start, as
// regexp.MustCompile would have; the packages' tests use every one.
package lazyre

import (
	"regexp"
	"sync"
)

// Regexp is a regular expression compiled when first used; safe for
// concurrent use, like regexp.Regexp.
type Regexp struct {
	expr string
	get  func() *regexp.Regexp
}

// New returns expr, to be compiled on first use.
func New(expr string) *Regexp {
	return &Regexp{expr: expr, get: sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })}
}

// Regexp returns the compiled expression.
func (r *Regexp) Regexp() *regexp.Regexp { return r.get() }

// String returns the expression's source text.
func (r *Regexp) String() string { return r.expr }

// Match is regexp.Regexp.Match.
func (r *Regexp) Match(b []byte) bool { return r.get().Match(b) }

// MatchString is regexp.Regexp.MatchString.
func (r *Regexp) MatchString(s string) bool { return r.get().MatchString(s) }

// FindStringIndex is regexp.Regexp.FindStringIndex.
func (r *Regexp) FindStringIndex(s string) []int { return r.get().FindStringIndex(s) }

// ReplaceAll is regexp.Regexp.ReplaceAll.
func (r *Regexp) ReplaceAll(src, repl []byte) []byte { return r.get().ReplaceAll(src, repl) }
