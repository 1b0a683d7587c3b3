package hunks

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// hunkHeaderRe is how hunk headers were read before parseHeader (a
// regular expression, which every CLI start would compile or link).
var hunkHeaderRe = regexp.MustCompile(`^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@(.*)$`)

func byRegexp(line string) *Hunk {
	m := hunkHeaderRe.FindStringSubmatch(line)
	if m == nil {
		return nil
	}
	n := func(s string, def int) int {
		if s == "" {
			return def
		}
		v, _ := strconv.Atoi(s)
		return v
	}
	return &Hunk{OldStart: n(m[1], 0), OldLines: n(m[2], 1), NewStart: n(m[3], 0), NewLines: n(m[4], 1), Context: m[5]}
}

// FuzzHeaderAsTheRegexpReadIt: parseHeader reads every hunk header as the
// regular expression it replaced did, and refuses what it refused.
func FuzzHeaderAsTheRegexpReadIt(f *testing.F) {
	for _, s := range []string{
		"@@ -1,3 +1,4 @@", "@@ -1 +1 @@ func f() {", "@@ -0,0 +1,2 @@", "@@ -12,0 +13 @@@@ x",
		"@@ -1,3 +1,4 @@@", "@@ -a,3 +1 @@", "@@ -1, +1 @@", "@@ -1,3  +1,4 @@", "@@ -1 +1@@", "@@ -+1 +1 @@",
		"@@ -99999999999999999999 +1 @@",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		if overflows(line) {
			return // past an int: the regexp read garbage, parseHeader refuses
		}
		got, want := parseHeader(line), byRegexp(line)
		if (got == nil) != (want == nil) {
			t.Fatalf("%q: parsed %+v, the regexp %+v", line, got, want)
		}
		if got != nil && (got.OldStart != want.OldStart || got.OldLines != want.OldLines || got.NewStart != want.NewStart || got.NewLines != want.NewLines || got.Context != want.Context) {
			t.Fatalf("%q: parsed %+v, the regexp %+v", line, got, want)
		}
	})
}

// overflows: numbers past an int, which both read as garbage.
func overflows(line string) bool {
	run := 0
	for i := 0; i < len(line); i++ {
		if line[i] >= '0' && line[i] <= '9' {
			run++
			if run > 18 {
				return true
			}
		} else {
			run = 0
		}
	}
	return false
}

func TestParseDiffNumbersUnits(t *testing.T) {
	diff := "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@ ctx\n-a\n+b\n@@ -5,2 +5,3 @@\n c\n+d\n c\n" +
		"diff --git a/bin b/bin\nBinary files differ\n"
	secs, err := ParseDiff(stringsReader(diff))
	if err != nil {
		t.Fatal(err)
	}
	if len(secs) != 2 || secs[0].Path != "x" || len(secs[0].Hunks) != 2 || secs[0].Hunks[1].N != 2 || secs[1].N != 3 || Units(secs) != 3 {
		t.Fatalf("%+v", secs)
	}
	if h := secs[0].Hunks[0]; h.Context != " ctx" || h.OldStart != 1 || h.NewLines != 1 {
		t.Errorf("%+v", h)
	}
	if _, err := ParseDiff(stringsReader("@@ -1 +1 @@\n")); err == nil {
		t.Error("a diff without a file header was read")
	}
	if _, err := ParseDiff(stringsReader("diff --git a/x b/x\n@@ -1 +x @@\n")); err == nil {
		t.Error("an unreadable hunk header was read")
	}
}

func stringsReader(s string) *strings.Reader { return strings.NewReader(s) }
