package lifecycle

import (
	"sync"
	"testing"

	"github.com/paddock-dev/paddock"
)

// TestRedactorsFollowTheValues: a run's redactor, asked for by the run or
// by its id alone (the API's funnel), masks its own secrets and its
// agent's credentials as their values are at each call: a secret changed
// is masked by its new value at once. The same values give the same
// redactor; a run forgotten, or never seen, is not known by id.
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
	if !masks(byID, "second-password-value") || masks(byID, "first-password-value") {
		t.Fatal("a secret changed is not masked by its new value")
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
