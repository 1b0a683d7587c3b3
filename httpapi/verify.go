package httpapi

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/paddock-dev/paddock"
)

// Verifier runs a project's checks in a run.
type Verifier interface {
	Verify(ctx context.Context, id string, req paddock.VerifyRequest) (*paddock.VerifyResult, error)
	// ProjectManifest is what verify runs in a new run of the project.
	ProjectManifest(ctx context.Context, name string) (json.RawMessage, error)
}

// verifyHandlers answer a run's verify and a project's manifest.
type verifyHandlers struct{ verifier Verifier }

func (h *verifyHandlers) verify(r *http.Request) (any, error) {
	var req paddock.VerifyRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	return h.verifier.Verify(r.Context(), r.PathValue("id"), req)
}

func (h *verifyHandlers) projectManifest(r *http.Request) (any, error) {
	return h.verifier.ProjectManifest(r.Context(), r.PathValue("name"))
}
