package paddock

import (
	"context"
	"time"
)

// IdempotencyHeader carries a call's idempotency key: a client that may
// make a call again (its answer was lost: a node stopped answering the
// node that forwarded it) sends the same key each time, and the node that
// serves the call does it once and answers every attempt with the first
// one's answer. A key is 1 to MaxIdempotencyKey printable ASCII
// characters, chosen by the client (a random one per call); it is the
// caller's own: the same key from another caller is another call.
const IdempotencyHeader = "Idempotency-Key"

// ReplayedHeader is set ("true") on an answer given again for a key
// whose call was already done.
const ReplayedHeader = "Idempotent-Replayed"

// MaxIdempotencyKey bounds a key's length.
const MaxIdempotencyKey = 128

// MaxKeyedBody bounds the body of a call with a key: the node reads it
// whole to know the call again. A bigger one (a bundle's import) takes no
// key.
const MaxKeyedBody = 32 << 20

// CallKeyTerm is how long a key's record is kept: a retry after it is a
// new call.
const CallKeyTerm = time.Hour

// CallRecord is what the store keeps of a call made with an idempotency
// key: which call (Request, a hash of its method, path and body), who ran
// it (Owner, the daemon instance), and once it is done its answer.
type CallRecord struct {
	// Key is the caller's key scoped to the caller (a hash of both).
	Key       string
	Request   string
	Owner     string
	Done      bool
	Status    int
	Answer    []byte
	CreatedAt time.Time
}

// CallKeys is the records of keyed calls in a transaction (Tx.CallKeys).
type CallKeys interface {
	// Claim records c as a call now running, unless a record has its
	// key: then it records nothing and returns that record.
	Claim(ctx context.Context, c *CallRecord) (existing *CallRecord, err error)
	// Get returns key's record, or nil if there is none.
	Get(ctx context.Context, key string) (*CallRecord, error)
	// Finish records the answer of the call with key, claimed by owner;
	// CodeConflict if owner does not hold it.
	Finish(ctx context.Context, key, owner string, status int, answer []byte) error
	// Forget removes the record of key's call if owner holds it and it
	// is not done: it did nothing, and may be made again.
	Forget(ctx context.Context, key, owner string) error
	// Prune removes the records made before before, and says how many.
	Prune(ctx context.Context, before time.Time) (int64, error)
}

type claimGateKey struct{}

// WithClaimGate returns ctx for a keyed call whose key is claimed while
// the call reads what it needs (the run, its grants): the call's first
// effect waits for the claim (AwaitClaim), which wait gives, nil when the
// key is the call's to make. A route is gated only where every effect of
// its call passes AwaitClaim (httpapi: the broker's calls).
func WithClaimGate(ctx context.Context, wait func(context.Context) error) context.Context {
	return context.WithValue(ctx, claimGateKey{}, wait)
}

// ClaimGated says whether ctx's call has a gate (WithClaimGate).
func ClaimGated(ctx context.Context) bool {
	_, ok := ctx.Value(claimGateKey{}).(func(context.Context) error)
	return ok
}

// AwaitClaim waits until ctx's call may take effect: at once without a
// gate (WithClaimGate); with one, until its key's claim is made. An error
// means the call is not to be made, and it is to take no effect at all:
// the key was another attempt's (its answer is given instead), or could
// not be claimed.
func AwaitClaim(ctx context.Context) error {
	if wait, ok := ctx.Value(claimGateKey{}).(func(context.Context) error); ok {
		return wait(ctx)
	}
	return nil
}

// CallClaimer is a Store that claims a call's key (CallKeys.Claim, after
// pruning the records made before prune, unless it is zero) in fewer
// round trips than Update: PostgreSQL sends the BEGIN, the node's fence,
// the prune, the claim and the key's record at once, then the COMMIT (two
// round trips, where Update takes three, and a fourth for a key already
// held). Its errors say what Update's would.
type CallClaimer interface {
	ClaimCall(ctx context.Context, c *CallRecord, prune time.Time) (existing *CallRecord, err error)
}

// ClaimCall claims c's key in s, as CallKeys.Claim does, pruning the
// records made before prune first (unless it is zero): through the
// store's ClaimCall where it is a CallClaimer, else in one UpdateLazy. A
// key held already is returned with no error, even if the commit failed:
// an error says this claim may have been stored.
func ClaimCall(ctx context.Context, s Store, c *CallRecord, prune time.Time) (existing *CallRecord, err error) {
	if cc, ok := s.(CallClaimer); ok {
		return cc.ClaimCall(ctx, c, prune)
	}
	err = UpdateLazy(ctx, s, func(tx Tx) error {
		if !prune.IsZero() {
			if _, err := tx.CallKeys().Prune(ctx, prune); err != nil {
				return err
			}
		}
		existing, err = tx.CallKeys().Claim(ctx, c)
		return err
	})
	if existing != nil {
		// Held already: this claim wrote nothing, whatever became of its
		// commit (a prune with it is let go). Said as an error, its caller
		// would give the key back, and with it the holder's claim.
		return existing, nil
	}
	return nil, err
}
