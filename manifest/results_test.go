package manifest

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

type parser func(io.Reader) (Counts, error)

var parsers = map[string]parser{"junit": ParseJUnit, "trx": ParseTRX, "go": ParseGoTestJSON}

// TestParseResults: each sample, as its tool writes it, counted.
func TestParseResults(t *testing.T) {
	for _, tc := range []struct {
		file, parser string
		want         Counts
	}{
		{"surefire.xml", "junit", Counts{Passed: 2, Failed: 2, Skipped: 1, Total: 5,
			Failures: []string{"com.example.AppTest.dividesByZero", "com.example.AppTest.parsesInput"}}},
		{"pytest.xml", "junit", Counts{Passed: 2, Failed: 1, Skipped: 2, Total: 5, Failures: []string{"tests.test_calc.test_sub"}}},
		{"jest-junit.xml", "junit", Counts{Passed: 2, Failed: 1, Total: 3, Failures: []string{"format pads dates"}}},
		{"vitest.xml", "junit", Counts{Passed: 1, Skipped: 1, Total: 2}},
		{"summary-only.xml", "junit", Counts{Passed: 3, Failed: 3, Skipped: 1, Total: 7}},
		{"dotnet.trx", "trx", Counts{Passed: 1, Failed: 1, Skipped: 1, Total: 3, Failures: []string{"Calc.Tests.AddTests.Overflows"}}},
		{"gotest.jsonl", "go", Counts{Passed: 1, Failed: 3, Skipped: 1, Total: 5,
			Failures: []string{"example.com/calc.TestDiv/zero", "example.com/calc.TestDiv", "example.com/calc/broken"}}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("testdata", "results", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			got, err := parsers[tc.parser](bytes.NewReader(b))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
			// Cut short, a report is an error or fewer results, never more.
			for _, n := range []int{0, 1, len(b) / 3, len(b) / 2, len(b) - 20} {
				part, err := parsers[tc.parser](bytes.NewReader(b[:n]))
				if err == nil && part.Total > got.Total {
					t.Errorf("%d bytes: %+v without an error", n, part)
				}
			}
		})
	}
}

func TestParseRefusesOtherInput(t *testing.T) {
	for _, tc := range []struct{ parser, in string }{
		{"junit", ""},
		{"junit", `<html><body>502</body></html>`},
		{"junit", `<testsuite tests="1"><testcase name="a">`},
		{"junit", "not xml at all"},
		{"trx", `<testsuites/>`},
		{"trx", `<TestRun><Results><UnitTestResult outcome="Passed"`},
		{"go", ""},
		{"go", "ok  \texample.com/x\t0.1s\n"},
	} {
		if got, err := parsers[tc.parser](strings.NewReader(tc.in)); err == nil {
			t.Errorf("%s %q: %+v, no error", tc.parser, tc.in, got)
		}
	}
	_, err := ParseJUnit(strings.NewReader(`<html/>`))
	if !errors.Is(err, ErrNotResults) {
		t.Errorf("a page that is not JUnit: %v", err)
	}
}

// TestFailuresAreCapped: a run with many failures keeps the first names.
func TestFailuresAreCapped(t *testing.T) {
	var b strings.Builder
	b.WriteString("<testsuite>")
	for range 50 {
		b.WriteString(`<testcase name="t"><failure/></testcase>`)
	}
	b.WriteString("</testsuite>")
	c, err := ParseJUnit(strings.NewReader(b.String()))
	if err != nil || c.Failed != 50 || len(c.Failures) != MaxFailures {
		t.Fatalf("%+v %v", c, err)
	}
	var sum Counts
	sum.Add(c)
	sum.Add(c)
	if sum.Failed != 100 || sum.Total != 100 || len(sum.Failures) != MaxFailures {
		t.Fatalf("sum: %+v", sum)
	}
}

// TestGoTestText: the log a person reads is go test's text, with the lines
// that were not events (a build's stderr) where they came.
func TestGoTestText(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "results", "gotest.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := GoTestText(&out, bytes.NewReader(b)); err != nil {
		t.Fatal(err)
	}
	want := "=== RUN   TestAdd\n--- PASS: TestAdd (0.00s)\n=== RUN   TestDiv\n=== RUN   TestDiv/zero\n" +
		"    calc_test.go:21: got 0, want error\n--- FAIL: TestDiv/zero (0.00s)\n--- FAIL: TestDiv (0.00s)\n" +
		"=== RUN   TestSlow\n    calc_test.go:30: slow; -short\n--- SKIP: TestSlow (0.00s)\n" +
		"FAIL\nFAIL\texample.com/calc\t0.012s\n" +
		"# example.com/calc/broken\nbroken/b.go:3:1: syntax error: non-declaration statement outside function body\n" +
		"# example.com/calc/broken\nFAIL\texample.com/calc/broken [build failed]\n" +
		"?   \texample.com/calc/util\t[no test files]\n"
	if out.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", out.String(), want)
	}
	// Written a byte at a time, as a pipe may deliver it, the same.
	var slow strings.Builder
	g := NewGoTestWriter(&slow)
	for i := range b {
		g.Write(b[i : i+1])
	}
	g.Close()
	if slow.String() != want || g.Counts().Total != 5 {
		t.Errorf("byte by byte: %+v\n%s", g.Counts(), slow.String())
	}
}

// TestGoTestLongLine: a line past the bound is text, passed through whole.
func TestGoTestLongLine(t *testing.T) {
	long := `{"Action":"output","Output":"` + strings.Repeat("x", maxGoTestLine+10) + `"}` + "\n"
	in := long + `{"Action":"pass","Package":"p","Test":"T"}` + "\n"
	var out bytes.Buffer
	g := NewGoTestWriter(&out)
	for s := in; s != ""; {
		n := min(len(s), 4096)
		g.Write([]byte(s[:n]))
		s = s[n:]
	}
	g.Close()
	if out.String() != long || g.Counts().Passed != 1 {
		t.Fatalf("%d bytes out, %+v", out.Len(), g.Counts())
	}
}

// FuzzParsers: no input makes a parser panic or count more failures than tests.
func FuzzParsers(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "results", "*"))
	for _, p := range files {
		b, _ := os.ReadFile(p)
		f.Add(b)
	}
	f.Add([]byte("<testsuites><testsuite><testcase><testcase>"))
	f.Add([]byte("{\"Action\":\"fail\"}\n{\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		for name, p := range parsers {
			c, _ := p(bytes.NewReader(b))
			if c.Passed < 0 || c.Failed < 0 || c.Skipped < 0 || c.Passed+c.Failed+c.Skipped != c.Total {
				t.Errorf("%s: %+v", name, c)
			}
			if len(c.Failures) > MaxFailures {
				t.Errorf("%s: %d failure names", name, len(c.Failures))
			}
		}
		GoTestText(io.Discard, bytes.NewReader(b))
	})
}

// TestGoTestJSONFromGo: the counts of what the go command itself writes,
// a build failure included.
func TestGoTestJSONFromGo(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a module's tests")
	}
	dir := t.TempDir()
	for name, src := range map[string]string{
		"go.mod": "module example.com/m\n\ngo 1.21\n",
		"a/a_test.go": `package a
import "testing"
func TestPass(t *testing.T) {}
func TestFail(t *testing.T) { t.Fatal("no") }
func TestSkip(t *testing.T) { t.Skip("later") }
func TestSub(t *testing.T) {
	t.Run("ok", func(t *testing.T) {})
	t.Run("bad", func(t *testing.T) { t.Error("bad") })
}
`,
		"b/b.go": "package b\n\nfunc F() { undefined() }\n",
	} {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("go", "test", "-json", "./...")
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err == nil {
		t.Fatal("go test passed")
	}
	// The log holds both streams, as a job's does.
	c, err := ParseGoTestJSON(io.MultiReader(&stderr, bytes.NewReader(stdout.Bytes())))
	if err != nil {
		t.Fatal(err)
	}
	// TestPass and TestSub/ok pass; TestSub fails with its subtest.
	want := Counts{Passed: 2, Failed: 4, Skipped: 1, Total: 7,
		Failures: []string{"example.com/m/a.TestFail", "example.com/m/a.TestSub", "example.com/m/a.TestSub/bad", "example.com/m/b"}}
	slices.Sort(c.Failures) // packages run in parallel
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("got  %+v\nwant %+v\n%s", c, want, stdout.String())
	}
	var text strings.Builder
	GoTestText(&text, bytes.NewReader(stdout.Bytes()))
	for _, s := range []string{"--- FAIL: TestFail", "a_test.go:4: no", "--- SKIP: TestSkip", "FAIL\texample.com/m/b [build failed]"} {
		if !strings.Contains(text.String(), s) {
			t.Errorf("the text lacks %q:\n%s", s, text.String())
		}
	}
}
