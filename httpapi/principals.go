package httpapi

import (
	"net/http"

	"github.com/paddock-dev/paddock"
)

// principalsHandlers answer who the caller is, and the admin's routes of
// principals and their tokens.
type principalsHandlers struct{ principals Principals }

// whoami answers GET /v1/whoami: the caller as the daemon sees it.
func (h *principalsHandlers) whoami(r *http.Request) (any, error) {
	if run, ok := r.Context().Value(scopeKey).(string); ok {
		return &paddock.Caller{Name: "run " + run + "'s agent"}, nil
	}
	if c := paddock.CallerOf(r.Context()); c != nil {
		return c, nil
	}
	return nil, paddock.Errorf(paddock.CodeUnauthorized, "this call names no caller")
}

func (h *principalsHandlers) need() error {
	if h.principals == nil {
		return paddock.Errorf(paddock.CodeUnsupported, "this daemon keeps no principals")
	}
	return nil
}

func (h *principalsHandlers) add(r *http.Request) (any, error) {
	var req paddock.PrincipalRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	if err := h.need(); err != nil {
		return nil, err
	}
	return h.principals.AddPrincipal(r.Context(), req, actor(r))
}

func (h *principalsHandlers) list(r *http.Request) (any, error) {
	if err := h.need(); err != nil {
		return nil, err
	}
	return nonNil(h.principals.Principals(r.Context()))
}

func (h *principalsHandlers) get(r *http.Request) (any, error) {
	if err := h.need(); err != nil {
		return nil, err
	}
	return h.principals.Principal(r.Context(), r.PathValue("name"))
}

func (h *principalsHandlers) set(r *http.Request) (any, error) {
	var req paddock.PrincipalRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	if err := h.need(); err != nil {
		return nil, err
	}
	return h.principals.SetPrincipal(r.Context(), r.PathValue("name"), req, actor(r))
}

func (h *principalsHandlers) remove(r *http.Request) (any, error) {
	if err := h.need(); err != nil {
		return nil, err
	}
	return h.principals.RemovePrincipal(r.Context(), r.PathValue("name"), actor(r))
}

func (h *principalsHandlers) createToken(r *http.Request) (any, error) {
	var req paddock.TokenRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	if err := h.need(); err != nil {
		return nil, err
	}
	return h.principals.CreateToken(r.Context(), req, actor(r))
}

func (h *principalsHandlers) tokens(r *http.Request) (any, error) {
	if err := h.need(); err != nil {
		return nil, err
	}
	return nonNil(h.principals.Tokens(r.Context(), r.URL.Query().Get("principal")))
}

func (h *principalsHandlers) revokeToken(r *http.Request) (any, error) {
	if err := h.need(); err != nil {
		return nil, err
	}
	return h.principals.RevokeToken(r.Context(), r.PathValue("token"), actor(r))
}
