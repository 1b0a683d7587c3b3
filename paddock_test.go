package paddock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
)

// reachable returns the states reachable from s through the table.
func reachable(s paddock.WorkspaceState) map[paddock.WorkspaceState]bool {
	seen := map[paddock.WorkspaceState]bool{}
	var walk func(paddock.WorkspaceState)
	walk = func(x paddock.WorkspaceState) {
		for _, to := range paddock.States {
			if paddock.CanTransition(x, to) && !seen[to] {
				seen[to] = true
				walk(to)
			}
		}
	}
	walk(s)
	return seen
}

func TestTransitionTable(t *testing.T) {
	// The record's happy path is legal, step by step.
	path := []paddock.WorkspaceState{paddock.StateRequested, paddock.StatePreparing, paddock.StateReady,
		paddock.StateActive, paddock.StateCheckpointed, paddock.StateRejected, paddock.StateCleanupPending, paddock.StateCleaned}
	for i := 0; i+1 < len(path); i++ {
		if !paddock.CanTransition(path[i], path[i+1]) {
			t.Errorf("%s -> %s is not allowed", path[i], path[i+1])
		}
	}
	// Retention is a hard stop. The table lets retained go only to orphaned
	// (its directory vanished), and Transition refuses cleanup of anything
	// ever retained, so the orphan path cannot lead to deletion.
	for _, s := range paddock.States {
		if paddock.CanTransition(paddock.StateRetained, s) && s != paddock.StateOrphaned {
			t.Errorf("retained -> %s is allowed", s)
		}
	}
	w := &paddock.Workspace{RunID: "r-1", State: paddock.StateOrphaned, RetainedAt: time.Now()}
	err := paddock.Transition(context.Background(), nil, w, paddock.StateCleanupPending, "gc")
	if !paddock.IsCode(err, paddock.CodeConflict) || w.State != paddock.StateOrphaned {
		t.Errorf("cleanup of a once-retained workspace: %v, state %s", err, w.State)
	}
	if !paddock.StateCleaned.Terminal() {
		t.Error("cleaned is not terminal")
	}
	// Every state but cleaned can reach cleaned or is retained (kept for good).
	for _, s := range paddock.States {
		if s == paddock.StateCleaned || s == paddock.StateRetained {
			continue
		}
		if !reachable(s)[paddock.StateCleaned] {
			t.Errorf("%s can never be cleaned", s)
		}
	}
	// No state may skip cleanup_pending on its way to cleaned.
	for _, s := range paddock.States {
		if s != paddock.StateCleanupPending && paddock.CanTransition(s, paddock.StateCleaned) {
			t.Errorf("%s -> cleaned skips cleanup_pending", s)
		}
	}
}

func TestNames(t *testing.T) {
	for _, ok := range []string{"app", "my-app", "a.b_c", "0x", "a23456789012345678901234567890123456789012345678901234567890123"} {
		if err := paddock.ValidateName(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "App", "my app", "naïve", "-x", ".x", "a/b", "a23456789012345678901234567890123456789012345678901234567890123x"} {
		if err := paddock.ValidateName(bad); !paddock.IsCode(err, paddock.CodeBadRequest) {
			t.Errorf("%q accepted", bad)
		}
	}
	// By hand, as the expression it replaces reads it.
	re := regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)
	alphabet := []string{"a", "z", "0", "9", ".", "_", "-", "A", " ", "/", "ü", "\x00"}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 20000; i++ {
		var b strings.Builder
		for n := rng.IntN(70); n > 0; n-- {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		name := b.String()
		if got := paddock.ValidateName(name) == nil; got != re.MatchString(name) {
			t.Fatalf("ValidateName(%q) = %v, the expression says %v", name, got, !got)
		}
	}
	for in, want := range map[string]string{"My App ü": "my-app", "über": "ber", "--x--": "x", "ü": "", "a  b": "a-b", "web.site": "web.site"} {
		if got := paddock.SlugName(in); got != want {
			t.Errorf("SlugName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestErrors(t *testing.T) {
	inner := paddock.Errorf(paddock.CodeBusy, "locked by r-1")
	wrapped := fmt.Errorf("create: %w", inner)
	if paddock.ErrorCode(wrapped) != paddock.CodeBusy || paddock.ErrorMessage(wrapped) != "locked by r-1" {
		t.Fatalf("code %s, message %q", paddock.ErrorCode(wrapped), paddock.ErrorMessage(wrapped))
	}
	plain := errors.New("open /secret/path: permission denied")
	if paddock.ErrorCode(plain) != paddock.CodeInternal || paddock.ErrorMessage(plain) != "internal error" {
		t.Fatal("an unexpected error leaks its text")
	}
	internal := &paddock.Error{Code: paddock.CodeInternal, Message: "x", Err: plain}
	if paddock.ErrorMessage(internal) != "internal error" || !errors.Is(internal, plain) {
		t.Fatal("internal error handling")
	}
	if len(paddock.Codes) != 13 {
		t.Fatalf("%d codes", len(paddock.Codes))
	}
}

// TestValidNodeID: the ids paddockd takes for a node, which the store
// writes into a statement unquoted, and what it refuses.
func TestValidNodeID(t *testing.T) {
	for id, want := range map[string]bool{
		"n1": true, "node-2.eu_west": true, "A": true, strings.Repeat("a", 63): true,
		"": false, strings.Repeat("a", 64): false, "-n": false, ".n": false, "_n": false,
		"o'brien": false, `back\slash`: false, "two words": false, "n;1": false, "nœud": false,
	} {
		if got := paddock.ValidNodeID(id); got != want {
			t.Errorf("ValidNodeID(%q) = %t, want %t", id, got, want)
		}
	}
}
