package httpapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/identity"
)

// Calls keeps the calls made with idempotency keys (lifecycle.Calls): the
// node that serves a keyed call claims its key in the store first, and a
// call made again with the key is answered from the record.
type Calls interface {
	// Begin claims key for the call hashed request; nil: the call is to
	// be made, then finished, forgotten or abandoned.
	Begin(ctx context.Context, key, request string) (*paddock.CallRecord, error)
	// Lookup returns key's record (nil: none), claiming nothing.
	Lookup(ctx context.Context, key string) (*paddock.CallRecord, error)
	// Finish records the call's answer and Forget gives its key back
	// (the call did nothing), each once the caller has its answer; what
	// cannot be written leaves the key claimed: a retry is refused.
	Finish(ctx context.Context, key string, status int, answer []byte)
	Forget(ctx context.Context, key string)
	// Abandon ends a call whose end cannot be known: its key stays
	// claimed, and a retry is told so.
	Abandon(key string)
	// Running says whether rec's call runs on this daemon now; Mine,
	// whether this daemon claimed it.
	Running(rec *paddock.CallRecord) bool
	Mine(rec *paddock.CallRecord) bool
	// Wait waits up to d until rec's call, running here, has its end
	// recorded, and says whether it has.
	Wait(ctx context.Context, rec *paddock.CallRecord, d time.Duration) bool
}

// Bounds of a keyed call: its body is read whole to be hashed, and its
// answer kept whole to be given again.
const (
	keyedInProcess = "in_progress"
	// keyedWait is how long a call made again waits for its first, still
	// being made on this node, before it is told so.
	keyedWait = 2 * time.Second
	// keyedElsewhere is how long a key another daemon claimed and has not
	// finished is taken for a call still being made there (a new run's,
	// placed on another node); past it, for one cut short.
	keyedElsewhere = 2 * time.Minute
)

// secretAnswers are the writes whose answer holds a secret shown once (a
// run's token, a principal's, a login link): their answer is never kept,
// nor any that holds a token's shape.
var secretAnswers = map[string]bool{"/v1/bootstrap": true, "/v1/tokens": true, "/v1/ui/login": true}

// holdsSecret says whether an answer to path must not be kept.
func holdsSecret(path string, answer []byte) bool {
	return secretAnswers[path] || bytes.Contains(answer, []byte("pdk_run_")) || bytes.Contains(answer, []byte(identity.TokenPrefix))
}

// maxKeptAnswer bounds the answer kept of a keyed call, and keptPerCaller
// what one caller's kept answers take in all, in a paddock.CallKeyTerm
// (tests lower them).
var (
	maxKeptAnswer = 256 << 10
	keptPerCaller = 16 << 20
)

// keptBudget bounds what each caller's kept answers take in the store, on
// this daemon: keptPerCaller bytes a paddock.CallKeyTerm, so that a run's
// agent (which paddock does not trust) cannot fill the state disk with
// them. Past it, the caller's answers are not kept: a call made again is
// told it was done.
type keptBudget struct {
	mu   sync.Mutex
	used map[string]*keptUse
}

type keptUse struct {
	bytes int
	since time.Time
}

// take counts n bytes more for scope, and says whether they fit.
func (b *keptBudget) take(scope string, n int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used == nil {
		b.used = map[string]*keptUse{}
	}
	u := b.used[scope]
	if u == nil || time.Since(u.since) > paddock.CallKeyTerm {
		for k, v := range b.used { // the term's end frees every caller's count
			if time.Since(v.since) > paddock.CallKeyTerm {
				delete(b.used, k)
			}
		}
		u = &keptUse{since: time.Now()}
		b.used[scope] = u
	}
	if u.bytes+n > keptPerCaller {
		return false
	}
	u.bytes += n
	return true
}

// keyed makes a call that carries an idempotency key (a write: POST, PUT,
// PATCH, DELETE) once: the first time it is made, its answer is recorded
// under the key, scoped to the caller; made again with the same key and
// the same method, path and body, it is answered with that answer
// (ReplayedHeader) and not made; with another call's, it is refused. A
// call that did nothing (its error says done: false) gives the key back.
// A keyed call, once begun, is made to its end though its caller goes
// (but a command: keyedContext). Without Calls the key is not read, nor
// before admits says the route admits the caller: one it does not is
// refused (refuse writes the answer, as the route would), its body not
// read whole for a key and nothing of it kept. Admission is decided once:
// next is told it was (admittedBefore), so a caller is never admitted here
// and refused there, or the other way round, by two looks at the store.
// The key is claimed before next is called, or, gated, while next reads
// what its call needs: its effects wait for the claim then
// (paddock.AwaitClaim), and what it writes is dropped if the key was not
// its own.
func (s *Server) keyed(gated bool, admits func(*http.Request) error, refuse func(http.ResponseWriter, *http.Request, error), next http.Handler) http.Handler {
	if s.Calls == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get(paddock.IdempotencyHeader)
		if key == "" || r.Method == http.MethodGet || r.Method == http.MethodHead || r.Method == http.MethodOptions {
			next.ServeHTTP(w, r)
			return
		}
		if err := admits(r); err != nil {
			refuse(w, r, err)
			return
		}
		r = r.WithContext(context.WithValue(r.Context(), admittedKey{}, true))
		scoped, request, err := keyOf(r, key)
		if err != nil {
			writeError(w, err)
			return
		}
		c, ctx := &keyClaim{done: make(chan struct{})}, r.Context()
		claim := func() {
			defer close(c.done)
			c.rec, c.err = s.claim(ctx, scoped, request)
		}
		kw := &keptWriter{ResponseWriter: w}
		if gated {
			// Claimed while the call reads the run: its effects wait for
			// the claim (the broker's AwaitClaim), and what it writes
			// waits too, dropped if the key was not the call's.
			go claim()
			r = r.WithContext(paddock.WithClaimGate(r.Context(), c.await))
			kw.claim = c
		} else if claim(); !c.claimed() {
			s.unclaimed(ctx, w, c, request)
			return
		}
		defer func() {
			if p := recover(); p != nil {
				if c.claimed() {
					// The call's record stays claimed and unfinished: a
					// retry is told its answer was lost.
					s.Calls.Abandon(scoped)
				}
				panic(p)
			}
			if !c.claimed() {
				// Gated, and the key was not the call's: the call took no
				// effect (AwaitClaim refused it), and what it wrote was
				// dropped.
				s.unclaimed(ctx, w, c, request)
				return
			}
			s.keep(r, scoped, kw)
		}()
		next.ServeHTTP(kw, r.WithContext(keyedContext(r)))
	})
}

// claim claims key for request: nil, nil when the call is the caller's
// to make; the key's record when another attempt has it (waited for a
// while when that attempt runs here).
func (s *Server) claim(ctx context.Context, scoped, request string) (*paddock.CallRecord, error) {
	rec, err := s.Calls.Begin(ctx, scoped, request)
	if err == nil && rec != nil && !rec.Done && rec.Request == request && s.Calls.Running(rec) &&
		s.Calls.Wait(ctx, rec, keyedWait) {
		// Its first call ended meanwhile (its answer is recorded once
		// its caller has it): that answer, or the key is free again.
		rec, err = s.Calls.Begin(ctx, scoped, request)
	}
	return rec, err
}

// unclaimed answers a keyed call whose key could not be claimed, or was
// another attempt's.
func (s *Server) unclaimed(ctx context.Context, w http.ResponseWriter, c *keyClaim, request string) {
	if c.err != nil {
		// Not claimed: nothing was done, and the call may be made again.
		writeError(w, paddock.MarkUndone(c.err))
		return
	}
	rec := c.rec
	if !rec.Done && s.Calls.Mine(rec) && !s.Calls.Running(rec) {
		// Running here when claimed, and ended since (a gated call waits
		// before it answers): its end is recorded by now, or was lost.
		if now, err := s.Calls.Lookup(ctx, rec.Key); err == nil && now != nil {
			rec = now
		}
	}
	s.answerKept(w, rec, request)
}

// keyClaim is a keyed call's claim of its key, made before the call, or
// beside it on a gated route.
type keyClaim struct {
	done chan struct{} // closed once rec and err are set
	rec  *paddock.CallRecord
	err  error
}

// claimed waits for the claim and says whether the key is the call's.
func (c *keyClaim) claimed() bool {
	<-c.done
	return c.err == nil && c.rec == nil
}

// errUnclaimed stops a gated call whose key was not its own; the call's
// answer is then the key's (unclaimed), not this.
var errUnclaimed = paddock.MarkUndone(paddock.Errorf(paddock.CodeConflict, "this call's %s is another attempt's", paddock.IdempotencyHeader))

// await is the gate of a gated call (paddock.AwaitClaim).
func (c *keyClaim) await(ctx context.Context) error {
	select {
	case <-c.done:
	case <-ctx.Done():
		return paddock.MarkUndone(ctx.Err()) // nothing of the call was done
	}
	if !c.claimed() {
		return errUnclaimed
	}
	return nil
}

type admittedKey struct{}

// admittedBefore reports whether keyed admitted r's caller already.
func admittedBefore(r *http.Request) bool {
	ok, _ := r.Context().Value(admittedKey{}).(bool)
	return ok
}

// keyedContext is the context a keyed call is made under: not ended by
// its caller's going (that is when its answer is lost, and asked for
// again), but for a command (exec), which its caller's going ends as it
// ends one without a key (paddock exec --json interrupted): its result,
// or error, is what the key then keeps.
func keyedContext(r *http.Request) context.Context {
	if strings.HasSuffix(r.URL.Path, "/exec") {
		return r.Context()
	}
	return context.WithoutCancel(r.Context())
}

// answerKeptElsewhere answers, on the node a new run's call comes to,
// one made again with its key before a node is placed for it (Place would
// hold a place, and maybe another node, for a run made already): from its
// record in the shared store, if the key has one. It says whether it
// answered.
func (s *Server) answerKeptElsewhere(w http.ResponseWriter, r *http.Request) bool {
	key := r.Header.Get(paddock.IdempotencyHeader)
	if key == "" || s.Calls == nil {
		return false
	}
	scoped, request, err := keyOf(r, key)
	if err != nil {
		writeError(w, err)
		return true
	}
	rec, err := s.Calls.Lookup(r.Context(), scoped)
	if err != nil {
		writeError(w, paddock.MarkUndone(err))
		return true
	}
	if rec == nil {
		return false
	}
	s.answerKept(w, rec, request)
	return true
}

// keyOf checks the key, scopes it to the caller (the same key from
// another principal, run or the operator is another call), and hashes
// the call: method, path, query and body (read whole, and put back).
func keyOf(r *http.Request, key string) (scoped, request string, err error) {
	if len(key) > paddock.MaxIdempotencyKey {
		return "", "", paddock.Errorf(paddock.CodeBadRequest, "an %s is at most %d characters", paddock.IdempotencyHeader, paddock.MaxIdempotencyKey)
	}
	for _, c := range []byte(key) {
		if c < 0x21 || c > 0x7e {
			return "", "", paddock.Errorf(paddock.CodeBadRequest, "an %s is printable ASCII without spaces", paddock.IdempotencyHeader)
		}
	}
	if streamed(r) {
		return "", "", paddock.Errorf(paddock.CodeBadRequest, "%s %s streams its answer, which is not kept: it takes no %s", r.Method, r.URL.Path, paddock.IdempotencyHeader)
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, paddock.MaxKeyedBody+1))
	if err != nil {
		return "", "", paddock.Errorf(paddock.CodeBadRequest, "reading the call's body: %v", err)
	}
	if len(body) > paddock.MaxKeyedBody {
		return "", "", paddock.Errorf(paddock.CodeTooLarge, "a call with an %s has a body of at most %d bytes", paddock.IdempotencyHeader, paddock.MaxKeyedBody)
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00%d\x00", r.Method, r.URL.Path, r.URL.RawQuery, len(body))
	h.Write(body)
	request = hex.EncodeToString(h.Sum(nil))
	h.Reset()
	fmt.Fprintf(h, "%s\x00%s", callerScope(r), key)
	return hex.EncodeToString(h.Sum(nil)), request, nil
}

// callerScope names who makes a call, for its key: a principal, a run's
// agent (its token), or the operator, acting for a run's agent or not.
func callerScope(r *http.Request) string {
	ctx := r.Context()
	if run, ok := ctx.Value(scopeKey).(string); ok {
		return "run " + run
	}
	who := "operator"
	if c := paddock.CallerOf(ctx); c != nil && c.Principal != "" {
		who = "principal " + c.Principal
	}
	if paddock.AgentCall(ctx) {
		who += " for the agent"
	}
	return who
}

// answerKept answers a call whose key has a record: the recorded answer,
// or why there is none.
func (s *Server) answerKept(w http.ResponseWriter, rec *paddock.CallRecord, request string) {
	switch {
	case rec.Request != request:
		writeError(w, paddock.Errorf(paddock.CodeConflict,
			"this %s was used for another call (another method, path or body); a key names one call", paddock.IdempotencyHeader))
	case rec.Done && rec.Status == 0:
		writeError(w, paddock.Errorf(paddock.CodeConflict,
			"the call with this %s was done, and its answer was not kept (it held a secret shown once, or was too large): what it did is in its run's events (paddock events)", paddock.IdempotencyHeader))
	case rec.Done:
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("Cache-Control", "no-store")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set(paddock.ReplayedHeader, "true")
		w.WriteHeader(rec.Status)
		w.Write(rec.Answer)
	case s.Calls.Running(rec):
		writeError(w, &paddock.Error{Code: paddock.CodeBusy,
			Message: "the call with this " + paddock.IdempotencyHeader + " is still being made on this node; ask again when it ends, with the same key, for its answer",
			Details: map[string]any{keyedInProcess: true}})
	case s.Calls.Mine(rec):
		writeError(w, paddock.Errorf(paddock.CodeConflict,
			"the call with this %s was made on this node and its answer could not be recorded: whether it was done is in its run's events (paddock events)", paddock.IdempotencyHeader))
	case s.Cluster != nil && time.Since(rec.CreatedAt) < keyedElsewhere:
		// Another node's, maybe (a daemon of its own knows another
		// instance only as one that stopped).
		writeError(w, &paddock.Error{Code: paddock.CodeBusy,
			Message: "the call with this " + paddock.IdempotencyHeader + " is being made by another daemon (" + rec.Owner + "); ask again in a moment, with the same key, for its answer",
			Details: map[string]any{keyedInProcess: true, "owner": rec.Owner}})
	default:
		writeError(w, &paddock.Error{Code: paddock.CodeConflict,
			Message: "the call with this " + paddock.IdempotencyHeader + " was begun by another daemon (" + rec.Owner + ", made " + rec.CreatedAt.Format("15:04:05 MST") +
				") that has not recorded its end: it is still being made there, or that daemon stopped; what it did is in its run's events (paddock events)",
			Details: map[string]any{"owner": rec.Owner}})
	}
}

// keep records a keyed call's answer, or gives its key back if it did
// nothing.
func (s *Server) keep(r *http.Request, scoped string, kw *keptWriter) {
	status := kw.status
	if status == 0 {
		status = http.StatusOK
	}
	switch {
	case status >= 300 && undoneAnswer(kw.body.Bytes()):
		s.Calls.Forget(r.Context(), scoped)
	case kw.over || holdsSecret(r.URL.Path, kw.body.Bytes()) || !s.kept.take(callerScope(r), kw.body.Len()):
		s.Calls.Finish(r.Context(), scoped, 0, nil)
	default:
		s.Calls.Finish(r.Context(), scoped, status, kw.body.Bytes())
	}
}

// undoneAnswer says whether an error answer says nothing was done.
func undoneAnswer(b []byte) bool {
	var env struct {
		Error *paddock.Error `json:"error"`
	}
	return json.Unmarshal(b, &env) == nil && env.Error != nil && paddock.Undone(env.Error)
}

// keptWriter passes an answer on and keeps a copy of it, up to
// maxKeptAnswer.
type keptWriter struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
	over   bool
	// claim, on a gated route: what is written waits for it, and is
	// dropped when the key was not the call's (its header into dropped).
	claim   *keyClaim
	dropped http.Header
}

// passes waits for a gated call's claim and says whether what it writes
// goes on.
func (w *keptWriter) passes() bool { return w.claim == nil || w.claim.claimed() }

// Header is the answer's header, or, for a dropped answer, a header of
// its own (its length, its type): the key's answer is given instead.
func (w *keptWriter) Header() http.Header {
	if !w.passes() {
		if w.dropped == nil {
			w.dropped = http.Header{}
		}
		return w.dropped
	}
	return w.ResponseWriter.Header()
}

func (w *keptWriter) WriteHeader(code int) {
	if !w.passes() {
		return
	}
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *keptWriter) Write(b []byte) (int, error) {
	if !w.passes() {
		return len(b), nil
	}
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if !w.over {
		if w.body.Len()+len(b) > maxKeptAnswer {
			w.over = true
			w.body = bytes.Buffer{}
		} else {
			w.body.Write(b)
		}
	}
	return w.ResponseWriter.Write(b)
}

// FlushError flushes what passes (a flush through Unwrap would send a
// dropped answer's header).
func (w *keptWriter) FlushError() error {
	if !w.passes() {
		return nil
	}
	return http.NewResponseController(w.ResponseWriter).Flush()
}

func (w *keptWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
