package manifest

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// MaxFailures is how many failed tests' names Counts keeps.
const MaxFailures = 10

// Counts are a test run's results. Results come from files the tested
// code could write: they say what happened, never whether the check
// passed (its exit status does).
type Counts struct {
	Passed  int `json:"passed"`
	Failed  int `json:"failed"`
	Skipped int `json:"skipped"`
	Total   int `json:"total"`
	// Failures are the first MaxFailures failed tests' names.
	Failures []string `json:"failures,omitempty"`
}

// Add adds o's results to c (several JUnit files of one run).
func (c *Counts) Add(o Counts) {
	c.Passed += o.Passed
	c.Failed += o.Failed
	c.Skipped += o.Skipped
	c.Total += o.Total
	for _, f := range o.Failures {
		c.fail(f, false)
	}
}

func (c *Counts) pass() { c.Passed++; c.Total++ }
func (c *Counts) skip() { c.Skipped++; c.Total++ }

// fail records a failure; count says whether it is counted (Add has).
func (c *Counts) fail(name string, count bool) {
	if count {
		c.Failed++
		c.Total++
	}
	if len(c.Failures) < MaxFailures {
		c.Failures = append(c.Failures, name)
	}
}

// ErrNotResults is returned for input that holds no results of the format.
var ErrNotResults = errors.New("no test results")

// xmlDecoder reads any declared charset as is: results are read for their
// counts and names, and an encoding label must not make them unreadable.
func xmlDecoder(r io.Reader) *xml.Decoder {
	dec := xml.NewDecoder(r)
	dec.CharsetReader = func(_ string, in io.Reader) (io.Reader, error) { return in, nil }
	return dec
}

// ParseJUnit counts a JUnit XML report: <testsuites> or one <testsuite>,
// as surefire, Gradle, pytest, jest-junit and vitest write them. Each
// <testcase> counts once: failed if it holds a <failure> or <error>,
// skipped if it holds <skipped>, passed otherwise (surefire's
// flakyFailure and rerunFailure are a pass). A report with no testcase
// elements is counted from its root's tests/failures/errors/skipped
// attributes. Truncated input returns what was read and an error.
func ParseJUnit(r io.Reader) (Counts, error) {
	var c Counts
	dec := xmlDecoder(r)
	var root *xml.StartElement
	depth, caseDepth, cases := 0, 0, 0
	var name string
	var failed, skipped bool
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return c, fmt.Errorf("junit: %w", err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			depth++
			if root == nil {
				if t.Name.Local != "testsuites" && t.Name.Local != "testsuite" {
					return c, fmt.Errorf("junit: root element <%s>: %w", t.Name.Local, ErrNotResults)
				}
				root = &t
				continue
			}
			switch {
			case t.Name.Local == "testcase" && caseDepth == 0:
				caseDepth, name, failed, skipped = depth, testName(t, "classname", "name"), false, false
			case caseDepth > 0 && depth == caseDepth+1:
				switch t.Name.Local {
				case "failure", "error":
					failed = true
				case "skipped":
					skipped = true
				}
			}
		case xml.EndElement:
			if caseDepth > 0 && depth == caseDepth {
				cases++
				switch {
				case failed:
					c.fail(name, true)
				case skipped:
					c.skip()
				default:
					c.pass()
				}
				caseDepth = 0
			}
			depth--
		}
	}
	if root == nil {
		return c, fmt.Errorf("junit: %w", ErrNotResults)
	}
	if cases == 0 {
		n := func(k string) int { v, _ := strconv.Atoi(attr(*root, k)); return max(v, 0) }
		c = summary(n("tests"), n("failures")+n("errors"), n("skipped")+n("disabled"))
	}
	return c, nil
}

// ParseTRX counts a Visual Studio test results file (dotnet test
// --logger trx): each <UnitTestResult> by its outcome; Passed is a pass,
// NotExecuted, Inconclusive and Pending are skipped, any other outcome
// (Failed, Error, Timeout, Aborted) a failure. With no UnitTestResult, the
// ResultSummary's <Counters> are used.
func ParseTRX(r io.Reader) (Counts, error) {
	var c Counts
	dec := xmlDecoder(r)
	rootSeen, results := false, 0
	var counters *xml.StartElement
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return c, fmt.Errorf("trx: %w", err)
		}
		t, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		if !rootSeen {
			if t.Name.Local != "TestRun" {
				return c, fmt.Errorf("trx: root element <%s>: %w", t.Name.Local, ErrNotResults)
			}
			rootSeen = true
			continue
		}
		switch t.Name.Local {
		case "UnitTestResult":
			results++
			switch attr(t, "outcome") {
			case "Passed", "PassedButRunAborted", "Warning":
				c.pass()
			case "NotExecuted", "Inconclusive", "Pending", "NotRunnable":
				c.skip()
			default:
				c.fail(testName(t, "", "testName"), true)
			}
		case "Counters":
			counters = &t
		}
	}
	if !rootSeen {
		return c, fmt.Errorf("trx: %w", ErrNotResults)
	}
	if results == 0 && counters != nil {
		n := func(k string) int { v, _ := strconv.Atoi(attr(*counters, k)); return max(v, 0) }
		total := n("total")
		c = summary(total, n("failed")+n("error")+n("timeout")+n("aborted"), total-n("passed")-n("failed")-n("error")-n("timeout")-n("aborted"))
	}
	return c, nil
}

// summary is Counts from a report's totals, which nothing checks agree:
// failures and skips are held within the total.
func summary(total, failed, skipped int) Counts {
	failed = min(max(failed, 0), total)
	skipped = min(max(skipped, 0), total-failed)
	return Counts{Total: total, Failed: failed, Skipped: skipped, Passed: total - failed - skipped}
}

func attr(e xml.StartElement, name string) string {
	for _, a := range e.Attr {
		if a.Name.Local == name {
			return a.Value
		}
	}
	return ""
}

// testName is "class.name", or the name alone.
func testName(e xml.StartElement, class, name string) string {
	n := attr(e, name)
	if cl := attr(e, class); class != "" && cl != "" && !strings.HasPrefix(n, cl) {
		return cl + "." + n
	}
	return n
}
