package lifecycle

import (
	"fmt"
	"sync"
	"testing"

	"github.com/paddock-dev/paddock"
)

// TestRedactorsFollowTheValues: a run's redactor, asked for by the run or
// by its id alone (the API's funnel), masks its own secrets and its
// agent's credentials as their values are at each call: a secret changed
// is masked by its new value at once, and by its old ones too (the last
// maxSecretValues read). The same values give the same redactor, and two
// sets of values never one; a run forgotten, or never seen, is not known
// by id.
func TestRedactorsFollowTheValues(t *testing.T) {
	var mu sync.Mutex
	values := map[string]string{"DB_PASSWORD": "first-password-value", "ANTHROPIC_API_KEY": "sk-ant-agent-credential-1", "OTHER": "not-this-runs-secret"}
	rs := &redactors{secret: func(name string) (string, bool) {
		mu.Lock()
		defer mu.Unlock()
		v, ok := values[name]
		return v, ok
	}}
	run := &paddock.Run{ID: "r-1", Secrets: []string{"DB_PASSWORD"},
		Agent: &paddock.AgentDefinition{Credentials: []paddock.CredentialRule{{Use: "anthropic"}}}}
	masks := func(red interface{ String(string) string }, v string) bool {
		return red.String("x "+v+" y") != "x "+v+" y"
	}

	red := rs.forRun(run)
	if !masks(red, "first-password-value") || !masks(red, "sk-ant-agent-credential-1") || masks(red, "not-this-runs-secret") {
		t.Fatal("the run's redactor does not mask its secret and its agent's credential alone")
	}
	byID, ok := rs.byID("r-1")
	if !ok || byID != red {
		t.Fatalf("by id: %v, the same redactor: %v", ok, byID == red)
	}
	if again := rs.forRun(run); again != red {
		t.Fatal("the same values made a new redactor")
	}

	mu.Lock()
	values["DB_PASSWORD"] = "second-password-value"
	mu.Unlock()
	byID, _ = rs.byID("r-1")
	if !masks(byID, "second-password-value") {
		t.Fatal("a secret changed is not masked by its new value")
	}
	// What the run wrote with the old value is still masked.
	if !masks(byID, "first-password-value") {
		t.Fatal("a secret changed unmasks its old value")
	}
	// A value read for anything else (a command's environment) is kept
	// too, and the last maxSecretValues values of a name are.
	rs.note("DB_PASSWORD", "read-for-a-command-env")
	if red := rs.forRun(run); !masks(red, "read-for-a-command-env") || !masks(red, "second-password-value") {
		t.Fatal("a value read for a command is not masked")
	}
	for i := range maxSecretValues {
		mu.Lock()
		values["DB_PASSWORD"] = fmt.Sprintf("rotated-password-%02d", i)
		mu.Unlock()
		rs.forRun(run)
	}
	red = rs.forRun(run)
	for i := range maxSecretValues {
		if !masks(red, fmt.Sprintf("rotated-password-%02d", i)) {
			t.Fatalf("value %d of the last %d is not masked", i, maxSecretValues)
		}
	}
	if masks(red, "first-password-value") || masks(red, "read-for-a-command-env") {
		t.Fatalf("more than the last %d values of a secret are kept", maxSecretValues)
	}
	// A value too short to mask (refused at create and at exec) takes no
	// place among a name's values.
	mu.Lock()
	values["SHORT"] = "ab"
	mu.Unlock()
	rs.of([]string{"SHORT"})
	if len(rs.seen["SHORT"]) != 0 {
		t.Fatalf("a value that cannot be masked is kept: %q", rs.seen["SHORT"])
	}

	// Two sets of values never share a redactor, whatever bytes they hold.
	keys := map[string]bool{}
	for _, vs := range []map[string][]string{
		{"D": {"one\x00two"}}, {"D": {"one", "two"}}, {"D": {"one#two"}}, {"D": {"one", "3:two"}},
		{"D": {"one"}, "E": {"two"}}, {"D1": {"two"}}, {"D": {"1:two"}}, {"D": {"two", "one"}},
	} {
		k := redactorKey(vs)
		if keys[k] {
			t.Fatalf("%q: a key another set of values has", vs)
		}
		keys[k] = true
	}

	if _, ok := rs.byID("r-2"); ok {
		t.Fatal("a run never seen is known by id")
	}
	rs.forget("r-1")
	if _, ok := rs.byID("r-1"); ok {
		t.Fatal("a run forgotten is still known by id")
	}
	if red := rs.forRun(&paddock.Run{ID: "r-3"}); red.Declared() {
		t.Fatal("a run without secrets masks declared values")
	}
}
