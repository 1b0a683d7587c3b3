package lifecycle_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/lifecycle"
)

// within runs fn, failing the test if it has not returned in 20 s (then
// calling answered, as the API does once its handler has returned).
func within(t *testing.T, what string, answered *paddock.AnswerFirst, fn func() error) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	case <-time.After(20 * time.Second):
		answered.Answered()
		<-done
		t.Fatalf("%s did not return before its answer: it waited for the look at the files it left for after it", what)
	}
}

// TestLooksLeftForAfterTheAnswer: the look at what a call changed, left
// for after the call's answer (paddock.AfterAnswer, as the API's JSON
// routes leave it), is begun by whatever waits for it before then: a
// second call that changes the files in the same request (two writes; an
// adoption restoring file after file), or a blame. Each call's effects
// are still its own.
func TestLooksLeftForAfterTheAnswer(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.project(t)
	withSandbox(t, e)
	bg := context.Background()

	t.Run("WritesInOneRequest", func(t *testing.T) {
		r := e.create(t, paddock.KindOverlay, "")
		ctx, answered := paddock.WithAnswerFirst(bg)
		defer answered.Answered()
		within(t, "two writes in one request", answered, func() error {
			for _, p := range []string{"a.txt", "b.txt"} {
				if _, err := e.m.Broker.CallTool(ctx, r.ID, "write", json.RawMessage(`{"path":"`+p+`","content":"x\n"}`)); err != nil {
					return err
				}
			}
			return nil
		})
		var b *paddock.Blame
		within(t, "a blame before the answer", answered, func() (err error) {
			b, err = e.m.Provenance.Blame(bg, r.ID, "")
			return err
		})
		seqs := map[string]int64{}
		for _, h := range b.Hunks {
			if len(h.Seqs) == 1 {
				seqs[h.Path] = h.Seqs[0]
			}
		}
		if seqs["a.txt"] == 0 || seqs["b.txt"] == 0 || seqs["a.txt"] == seqs["b.txt"] {
			t.Fatalf("each write's file blamed on its own call: %v (%+v)", seqs, b.Hunks)
		}
	})

	t.Run("Adoption", func(t *testing.T) {
		e.shareCheckpoints()
		r := e.create(t, paddock.KindClone, "")
		for _, n := range []string{"a.txt", "b.txt"} {
			if err := os.WriteFile(filepath.Join(r.Workspace.Root, n), []byte(n+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		lifecycle.StoreCheckpoint(bg, e.m, r.ID, "test")
		ctx, answered := paddock.WithAnswerFirst(bg)
		defer answered.Answered()
		within(t, "an adoption restoring two files", answered, func() error {
			_, err := e.m.Nodes.Adopt(ctx, r.ID, "test")
			return err
		})
	})
}
