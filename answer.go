package paddock

import (
	"context"
	"sync"
)

// AnswerFirst holds the work a call leaves for after its answer (the
// look at what a command changed, which its answer does not wait for):
// begun once the answer is on its way, so that it does not take the
// processor from the answer's last steps and its caller's reading of it.
// The server that answers makes one for each call (WithAnswerFirst) and
// calls Answered once the answer is written and flushed, or the call has
// failed, whatever happened; work left on a context without one, or
// after Answered, begins at once.
type AnswerFirst struct {
	mu       sync.Mutex
	answered bool
	after    []func()
}

type answerFirstKey struct{}

// WithAnswerFirst returns ctx carrying a new AnswerFirst, and it.
func WithAnswerFirst(ctx context.Context) (context.Context, *AnswerFirst) {
	a := &AnswerFirst{}
	return context.WithValue(ctx, answerFirstKey{}, a), a
}

// AfterAnswer runs fn once the answer to ctx's call is on its way (its
// AnswerFirst's Answered), or at once if ctx has none, or was answered.
// fn must not wait for the call.
func AfterAnswer(ctx context.Context, fn func()) {
	if a, ok := ctx.Value(answerFirstKey{}).(*AnswerFirst); ok {
		a.mu.Lock()
		if !a.answered {
			a.after = append(a.after, fn)
			a.mu.Unlock()
			return
		}
		a.mu.Unlock()
	}
	fn()
}

// Answered runs the work left for after the answer, in the order it was
// left; what is left after it runs at once.
func (a *AnswerFirst) Answered() {
	a.mu.Lock()
	after := a.after
	a.after, a.answered = nil, true
	a.mu.Unlock()
	for _, fn := range after {
		fn()
	}
}
