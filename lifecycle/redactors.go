package lifecycle

import (
	"slices"
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
// so a secret changed is masked by its new value from the next call on.
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
}

// maxRedactors and maxRunNames bound what is kept: past either, all of it
// is dropped and made again as it is asked for. (A run's names are kept
// again after forgetRun if an answer about it is asked for: a node keeps
// the names of every run asked about, not only its own.)
const (
	maxRedactors = 1024
	maxRunNames  = 1 << 14
)

// secretNamesOf are the names of the secrets r's answers mask.
func secretNamesOf(r *paddock.Run) []string {
	names := slices.Clone(r.Secrets)
	if r.Agent != nil {
		names = append(names, credentialSecrets(r.Agent)...)
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

// of is the redactor of the values the names have now.
func (rs *redactors) of(names []string) *redact.Redactor {
	values := map[string]string{}
	var key strings.Builder
	for _, n := range names {
		if rs.secret == nil {
			break
		}
		if v, ok := rs.secret(n); ok {
			values[n] = v
		}
	}
	if len(values) == 0 {
		return redact.New(nil)
	}
	sorted := make([]string, 0, len(values))
	for n := range values {
		sorted = append(sorted, n)
	}
	slices.Sort(sorted)
	for _, n := range sorted {
		key.WriteString(n)
		key.WriteByte(0)
		key.WriteString(values[n])
		key.WriteByte(0)
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if red := rs.byKey[key.String()]; red != nil {
		return red
	}
	if rs.byKey == nil || len(rs.byKey) >= maxRedactors {
		rs.byKey = map[string]*redact.Redactor{}
	}
	red := redact.New(values)
	rs.byKey[key.String()] = red
	return red
}
