package changeset_test

import (
	"strings"
	"testing"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/changeset"
	"github.com/paddock-dev/paddock/gitx"
)

// raw is git's raw output (diff --raw -z) for the entries given as
// "STATUS path" ("A new.txt", "D gone.txt").
func raw(entries ...string) []byte {
	var b strings.Builder
	for _, e := range entries {
		status, p, _ := strings.Cut(e, " ")
		b.WriteString(":100644 100644 1111111 2222222 " + status + "\x00" + p + "\x00")
	}
	return []byte(b.String())
}

func TestLimitsDefaults(t *testing.T) {
	t.Parallel()
	def := changeset.Limits{MaxEntries: 20000, MaxFile: 100 << 20, MaxTotal: 256 << 20}
	if got := (changeset.Limits{}).WithDefaults(); got != def {
		t.Errorf("zero limits: %+v, want %+v", got, def)
	}
	if got := (changeset.Limits{MaxEntries: -1, MaxFile: -1, MaxTotal: -1}).WithDefaults(); got != def {
		t.Errorf("negative limits: %+v, want %+v", got, def)
	}
	set := changeset.Limits{MaxEntries: 3, MaxFile: 10, MaxTotal: 50}
	if got := set.WithDefaults(); got != set {
		t.Errorf("set limits: %+v, want them kept", got)
	}
	if got := (changeset.Limits{MaxFile: 10}).WithDefaults(); got != (changeset.Limits{MaxEntries: 20000, MaxFile: 10, MaxTotal: 256 << 20}) {
		t.Errorf("one limit set: %+v", got)
	}
}

// TestLimitsCheck: the limits are checked from git's raw entries and the
// files' sizes as the diff read them, each at its bound and one past it;
// deletions and files the diff did not read weigh nothing, withheld files
// count as entries.
func TestLimitsCheck(t *testing.T) {
	t.Parallel()
	// (A link weighs its target's name, what git stores: gitx gives its
	// length, TestDiffCheckSeesSizes.)
	sizes := map[string]int64{"ten": 10, "eleven": 11, "twenty": 20, "big": 1000}
	size := func(p string) (int64, bool) {
		n, ok := sizes[p]
		return n, ok
	}
	withheld := []gitx.Withheld{{Path: "sub/.git"}}
	l := changeset.Limits{MaxEntries: 3, MaxFile: 10, MaxTotal: 25}
	for _, c := range []struct {
		name     string
		limits   changeset.Limits
		raw      []byte
		withheld []gitx.Withheld
		refused  string // in the message; "" when within the limits
	}{
		{"nothing", l, nil, nil, ""},
		{"at every limit", changeset.Limits{MaxEntries: 3, MaxFile: 20, MaxTotal: 40}, raw("A ten", "M twenty", "A ten"), nil, ""},
		{"one entry too many", l, raw("D a", "D b", "D c", "D d"), nil, "more than 3 entries"},
		{"a withheld entry too many", l, raw("D a", "D b", "D c"), withheld, "more than 3 entries"},
		{"withheld within", l, raw("A ten", "A ten"), withheld, ""},
		{"a file one byte over", l, raw("A eleven"), nil, "eleven is 11 bytes, over the change set's file limit of 10"},
		{"a modified file over", l, raw("M big"), nil, "big is 1000 bytes"},
		{"a deleted file weighs nothing", l, raw("D big", "A ten"), nil, ""},
		{"a vanished file weighs nothing", l, raw("A gone", "A ten"), nil, ""},
		{"the total one byte over", changeset.Limits{MaxEntries: 3, MaxFile: 20, MaxTotal: 40}, raw("A ten", "A twenty", "A eleven"), nil, "passes 40 bytes"},
	} {
		err := c.limits.Check(c.raw, c.withheld, size)
		switch {
		case c.refused == "" && err != nil:
			t.Errorf("%s: refused: %v", c.name, err)
		case c.refused != "" && !paddock.IsCode(err, paddock.CodeTooLarge):
			t.Errorf("%s: %v, want too large", c.name, err)
		case c.refused != "" && !strings.Contains(err.Error(), c.refused):
			t.Errorf("%s: %v, want %q in it", c.name, err, c.refused)
		}
	}
}

// TestLimitsCheckCounts: an overlay's upper layer is held to the same
// limits, from its counts alone.
func TestLimitsCheckCounts(t *testing.T) {
	t.Parallel()
	l := changeset.Limits{MaxEntries: 3, MaxFile: 10, MaxTotal: 25}
	for _, c := range []struct {
		name    string
		counts  changeset.Counts
		refused string
	}{
		{"nothing", changeset.Counts{}, ""},
		{"at every limit", changeset.Counts{Files: 3, Bytes: 25, Largest: "a", LargestSize: 10}, ""},
		{"one file too many", changeset.Counts{Files: 4, Bytes: 4, Largest: "a", LargestSize: 1}, "more than 3 entries"},
		{"a file over", changeset.Counts{Files: 1, Bytes: 11, Largest: "src/a.bin", LargestSize: 11}, "src/a.bin is 11 bytes"},
		{"the total over", changeset.Counts{Files: 3, Bytes: 26, Largest: "a", LargestSize: 10}, "passes 25 bytes"},
	} {
		err := l.CheckCounts(c.counts)
		switch {
		case c.refused == "" && err != nil:
			t.Errorf("%s: refused: %v", c.name, err)
		case c.refused != "" && (!paddock.IsCode(err, paddock.CodeTooLarge) || !strings.Contains(err.Error(), c.refused)):
			t.Errorf("%s: %v, want too large with %q", c.name, err, c.refused)
		}
	}
}
