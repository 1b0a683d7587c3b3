package paddock

import (
	"context"
	"slices"
	"testing"
)

// TestAfterAnswer: work left on a call's context waits for Answered, in
// the order it was left; work left after it, or on a context without an
// AnswerFirst, runs at once.
func TestAfterAnswer(t *testing.T) {
	var got []string
	note := func(s string) func() { return func() { got = append(got, s) } }
	AfterAnswer(context.Background(), note("no AnswerFirst"))
	ctx, a := WithAnswerFirst(context.Background())
	AfterAnswer(ctx, note("first"))
	AfterAnswer(context.WithoutCancel(ctx), note("second"))
	if !slices.Equal(got, []string{"no AnswerFirst"}) {
		t.Fatalf("before the answer: %q", got)
	}
	a.Answered()
	AfterAnswer(ctx, note("after"))
	if want := []string{"no AnswerFirst", "first", "second", "after"}; !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}
