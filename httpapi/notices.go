package httpapi

import (
	"context"
	"net/http"
	"slices"
	"strings"

	"github.com/paddock-dev/paddock"
)

// Notices are the notable events of every run (the firehose), masked
// as each run's answers are.
type Notices interface {
	// WaitNotices returns up to limit notices after id after, waiting,
	// when there are none yet, until one is made or ctx ends.
	WaitNotices(ctx context.Context, after int64, limit int) ([]*paddock.Notice, error)
}

// noticesHandlers answer the firehose.
type noticesHandlers struct {
	notices Notices
}

// stream answers GET /v1/events/stream?after=ID&types=T1,T2: the notices
// of every run as Server-Sent Events, each's id its notice's id, so that
// a client that reconnects with Last-Event-ID (or ?after=) gets every
// later notice once, in order; with types, only notices of those types.
func (h *noticesHandlers) stream(w http.ResponseWriter, r *http.Request) {
	after, err := resumeAfter(r)
	if err != nil {
		writeError(w, err)
		return
	}
	var types []string
	if v := r.URL.Query().Get("types"); v != "" {
		types = strings.Split(v, ",")
		for _, t := range types {
			if !paddock.IsNoticeType(t) {
				writeError(w, paddock.Errorf(paddock.CodeBadRequest, "types: %q is not a notice type (%s)", t, strings.Join(paddock.NoticeTypes, ", ")))
				return
			}
		}
	}
	// A principal scoped to some projects is told of their runs' notices.
	c := paddock.CallerOf(r.Context())
	serveSSE(w, r, after, func(ctx context.Context, after int64) ([]sseEvent, int64, error) {
		ns, err := h.notices.WaitNotices(ctx, after, 500)
		var out []sseEvent
		for _, n := range ns {
			if (len(types) == 0 || slices.Contains(types, n.Type)) && (c == nil || c.InProject(n.Project)) {
				out = append(out, sseEvent{id: n.ID, name: n.Type, data: n})
			}
			after = n.ID
		}
		return out, after, err
	})
}
