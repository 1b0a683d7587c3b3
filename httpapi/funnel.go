package httpapi

import (
	"net/http"

	"github.com/paddock-dev/paddock/redact"
)

// runFunnel returns w masking the declared secrets of the run a request
// names, if it names one that has any: every answer about a run, errors
// included, passes the run's funnel, whatever produced it (writeJSON
// masks credential shapes in all answers). Each answer is written whole
// in one Write, so no secret is cut between writes. A value that JSON
// escapes (one holding a quote, a backslash or a control character) is
// masked where it was produced, not here.
func (a *apiBase) runFunnel(w http.ResponseWriter, r *http.Request) http.ResponseWriter {
	id := r.PathValue("id")
	if id == "" || a.redactors == nil {
		return w
	}
	red, err := a.redactors.Redactor(r.Context(), id)
	if err != nil || !red.Declared() {
		return w
	}
	return &secretMasker{ResponseWriter: w, red: red}
}

type secretMasker struct {
	http.ResponseWriter
	red *redact.Redactor
}

func (m *secretMasker) Unwrap() http.ResponseWriter { return m.ResponseWriter }

func (m *secretMasker) Write(p []byte) (int, error) {
	if _, err := m.ResponseWriter.Write(m.red.Secrets(p)); err != nil {
		return 0, err
	}
	return len(p), nil
}
