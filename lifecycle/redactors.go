package lifecycle

import (
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/redact"
)

// redactors keeps what masking a run's answers needs, so that a call does
// not pay for it again: the names of the secrets each run masks (its own
// and its agent's credentials, fixed when the run is made: the store
// has no update of a run), by run id, and the redactors made of the
// values those names had, by the values.
// The values are read at each call (Secret: a file or the environment),
// so a secret changed is masked by its new value from the next call on;
// and every value a secret has been read with while this daemon runs
// (for a command's environment, a credential, a mask: kernel.readSecret)
// is masked as long as it runs, so that a secret changed while a run
// used it does not unmask its old value in what the run wrote before
// (a file's diff, a log). A daemon started after the change knows only
// the new value.
//
// The API's funnel asks for a run's redactor by id for every answer about
// the run; it read the whole run for the names (a store read, with its
// review and submission, about 100 µs), and the broker made the same
// redactor three times a call (its secrets' forms, and their prefilter at
// the first mask).
type redactors struct {
	secret func(name string) (string, bool) // the kernel's Secret; nil: none

	mu    sync.Mutex
	names map[string][]string         // by run id
	byKey map[string]*redact.Redactor // by the names and values, in order
	// seen are the values each secret has been read with, oldest first,
	// at most maxSecretValues a name.
	seen map[string][]string
}

// maxRedactors and maxRunNames bound what is kept: past either, all of it
// is dropped and made again as it is asked for. (A run's names are kept
// again after forgetRun if an answer about it is asked for: a node keeps
// the names of every run asked about, not only its own.)
const (
	maxRedactors = 1024
	maxRunNames  = 1 << 14
)

// maxSecretValues is how many values of one secret are masked: its last
// ones, the current among them.
const maxSecretValues = 8

// note keeps v as a value secret name has been read with.
func (rs *redactors) note(name, v string) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.noteLocked(name, v)
}

func (rs *redactors) noteLocked(name, v string) {
	if !redact.Maskable(v) {
		return // refused at create and exec, and never masked: no place taken
	}
	vs := rs.seen[name]
	if i := slices.Index(vs, v); i >= 0 {
		// Read again: the newest, the last one to go.
		rs.seen[name] = append(slices.Delete(vs, i, i+1), v)
		return
	}
	if rs.seen == nil {
		rs.seen = map[string][]string{}
	}
	if len(vs) >= maxSecretValues {
		vs = slices.Delete(vs, 0, len(vs)-maxSecretValues+1)
	}
	rs.seen[name] = append(vs, v)
}

// secretNamesOf are the names of the secrets r's answers mask: its own,
// its agent's credentials, and, on a review or check run, the reviewed
// run's (ReviewOf.Masks), whose change set its workspace holds.
func secretNamesOf(r *paddock.Run) []string {
	names := slices.Clone(r.Secrets)
	if r.Agent != nil {
		names = append(names, credentialSecrets(r.Agent)...)
	}
	if r.ReviewOf != nil {
		for _, n := range r.ReviewOf.Masks {
			if !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
	}
	return names
}

// forRun is r's redactor, and keeps r's names for byID.
func (rs *redactors) forRun(r *paddock.Run) *redact.Redactor {
	rs.mu.Lock()
	names, ok := rs.names[r.ID]
	if !ok {
		names = secretNamesOf(r)
		if rs.names == nil || len(rs.names) >= maxRunNames {
			rs.names = map[string][]string{}
		}
		rs.names[r.ID] = names
	}
	rs.mu.Unlock()
	return rs.of(names)
}

// byID is the redactor of the run with this id, if forRun has seen it.
func (rs *redactors) byID(id string) (*redact.Redactor, bool) {
	rs.mu.Lock()
	names, ok := rs.names[id]
	rs.mu.Unlock()
	if !ok {
		return nil, false
	}
	return rs.of(names), true
}

// forget drops a run's names: it is gone from this node.
func (rs *redactors) forget(id string) {
	rs.mu.Lock()
	delete(rs.names, id)
	rs.mu.Unlock()
}

// of is the redactor of the values the names have now, and of those they
// had before (note).
func (rs *redactors) of(names []string) *redact.Redactor {
	current := map[string]string{}
	for _, n := range names {
		if rs.secret == nil {
			break
		}
		if v, ok := rs.secret(n); ok {
			current[n] = v
		}
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	values := map[string][]string{}
	for _, n := range names {
		if v, ok := current[n]; ok {
			rs.noteLocked(n, v)
		}
		if vs := rs.seen[n]; len(vs) > 0 {
			values[n] = slices.Clone(vs)
		}
	}
	if len(values) == 0 {
		return redact.New(nil)
	}
	key := redactorKey(values)
	if red := rs.byKey[key]; red != nil {
		return red
	}
	if rs.byKey == nil || len(rs.byKey) >= maxRedactors {
		rs.byKey = map[string]*redact.Redactor{}
	}
	red := redact.NewValues(values)
	rs.byKey[key] = red
	return red
}

// redactorKey is what a redactor is kept by: the names and their values,
// each string with its length before it, so that no two sets of values
// make one key, whatever bytes the values hold.
func redactorKey(values map[string][]string) string {
	sorted := make([]string, 0, len(values))
	for n := range values {
		sorted = append(sorted, n)
	}
	slices.Sort(sorted)
	var key strings.Builder
	put := func(s string) {
		key.WriteString(strconv.Itoa(len(s)))
		key.WriteByte(':')
		key.WriteString(s)
	}
	for _, n := range sorted {
		put(n)
		key.WriteString(strconv.Itoa(len(values[n])))
		key.WriteByte('#')
		for _, v := range values[n] {
			put(v)
		}
	}
	return key.String()
}
