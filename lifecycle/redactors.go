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
// and its agent's credentials, fixed when the run is made), by run id,
// and the redactors made of the values those names had, by the values.
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

	names sync.Map // run id → []string

	mu    sync.Mutex
	byKey map[string]*redact.Redactor // by the names and values, in order
}

// maxRedactors bounds the redactors kept: past it they are made again.
const maxRedactors = 1024

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
	names, ok := rs.names.Load(r.ID)
	if !ok {
		names, _ = rs.names.LoadOrStore(r.ID, secretNamesOf(r))
	}
	return rs.of(names.([]string))
}

// byID is the redactor of the run with this id, if forRun has seen it.
func (rs *redactors) byID(id string) (*redact.Redactor, bool) {
	names, ok := rs.names.Load(id)
	if !ok {
		return nil, false
	}
	return rs.of(names.([]string)), true
}

// forget drops a run's names: it is gone from this node.
func (rs *redactors) forget(id string) { rs.names.Delete(id) }

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
