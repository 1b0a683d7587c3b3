package httpapi

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/paddock-dev/paddock"
)

// Bundles carry a run's change set between daemons: Bundle writes a
// run's submitted change set as a signed bundle, BundleKey is the public
// key it is signed with, Import restores a run from a bundle read from
// body (see package bundle).
type Bundles interface {
	// Run is the bundles' look at a run: a missing one is an error
	// envelope, before any byte of a bundle.
	Run(ctx context.Context, id string) (*paddock.Run, error)
	Bundle(ctx context.Context, id string, w io.Writer) error
	BundleKey(ctx context.Context) (*paddock.BundleKey, error)
	Import(ctx context.Context, req paddock.ImportRequest, body io.Reader) (*paddock.ImportResult, error)
}

// bundlesHandlers answer a run's bundle, its key and an import.
type bundlesHandlers struct {
	bundles Bundles
	api     *apiBase
}

// BundleType is a bundle's media type.
const BundleType = "application/vnd.paddock.bundle+tar"

// bundle answers GET /v1/runs/{id}/bundle: the run's signed bundle, as it
// is written. Its bytes pass the run's funnel as every answer does: a
// declared secret masked in it would break its signature, never leak (and
// a change set that holds one is refused before anything is sent). A
// failure once the bundle has begun cuts it short, without its manifest
// and signature, which no reader accepts.
func (h *bundlesHandlers) bundle(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, err := h.bundles.Run(r.Context(), id); err != nil {
		h.api.fail(w, r, err)
		return
	}
	http.NewResponseController(w).SetWriteDeadline(time.Time{}) // a large one outlives the write timeout
	bw := &lazyHeader{ResponseWriter: h.api.runFunnel(w, r), set: func(hdr http.Header) {
		hdr.Set("Content-Type", BundleType)
		hdr.Set("Cache-Control", "no-store")
		hdr.Set("X-Content-Type-Options", "nosniff")
	}}
	if err := h.bundles.Bundle(r.Context(), id, bw); err != nil {
		if bw.started {
			h.api.log().Error("a bundle was cut short", "run", id, "err", err)
			return
		}
		h.api.fail(w, r, err)
	}
}

// lazyHeader answers 200 with its headers at the first byte, so that a
// refusal before any (a missing submission, a secret) is still an error
// envelope.
type lazyHeader struct {
	http.ResponseWriter
	set     func(http.Header)
	started bool
}

func (l *lazyHeader) Write(p []byte) (int, error) {
	if !l.started {
		l.started = true
		l.set(l.Header())
		l.WriteHeader(http.StatusOK)
	}
	return l.ResponseWriter.Write(p)
}

func (h *bundlesHandlers) bundleKey(r *http.Request) (any, error) {
	return h.bundles.BundleKey(r.Context())
}

// importBundle answers POST /v1/import?project=P&kind=K&trust=KEY&untrusted=true:
// the body is the bundle.
func (h *bundlesHandlers) importBundle(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	req := paddock.ImportRequest{Project: q.Get("project"), Kind: q.Get("kind"), Trust: q["trust"]}
	if v := q.Get("untrusted"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			h.api.fail(w, r, paddock.Errorf(paddock.CodeBadRequest, "untrusted=%q: want true or false", v))
			return
		}
		req.Untrusted = b
	}
	// A large bundle takes longer to send than the server's read timeout.
	http.NewResponseController(w).SetReadDeadline(time.Now().Add(30 * time.Minute))
	body := http.MaxBytesReader(w, r.Body, paddock.MaxBundle)
	res, err := h.bundles.Import(r.Context(), req, body)
	if err != nil {
		h.api.fail(w, r, err)
		return
	}
	writeData(w, http.StatusCreated, res)
}

// Queue is the merge queue: QueueAdd puts an approved run in it, Queue
// lists it (of a project, finished entries too if all), QueueEntry is a
// run's newest entry, QueueRemove takes one out, QueueUndo moves the
// branch a landed one moved back.
type Queue interface {
	QueueAdd(ctx context.Context, id string, req paddock.QueueAddRequest, by string) (*paddock.QueueEntry, error)
	Queue(ctx context.Context, project string, all bool) ([]*paddock.QueueEntry, error)
	QueueEntry(ctx context.Context, id string) (*paddock.QueueEntry, error)
	QueueRemove(ctx context.Context, id, by string) (*paddock.QueueEntry, error)
	QueueUndo(ctx context.Context, id, by string) (*paddock.QueueEntry, error)
}

// queueHandlers answer the merge queue's routes.
type queueHandlers struct{ queue Queue }

func (h *queueHandlers) queueAdd(r *http.Request) (any, error) {
	var req paddock.QueueAddRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	return h.queue.QueueAdd(r.Context(), r.PathValue("id"), req, actor(r))
}

func (h *queueHandlers) listQueue(r *http.Request) (any, error) {
	all, err := boolParam(r, "all")
	if err != nil {
		return nil, err
	}
	return h.queue.Queue(r.Context(), r.URL.Query().Get("project"), all)
}

func (h *queueHandlers) queueEntry(r *http.Request) (any, error) {
	return h.queue.QueueEntry(r.Context(), r.PathValue("id"))
}

func (h *queueHandlers) queueRemove(r *http.Request) (any, error) {
	return h.queue.QueueRemove(r.Context(), r.PathValue("id"), actor(r))
}

func (h *queueHandlers) queueUndo(r *http.Request) (any, error) {
	return h.queue.QueueUndo(r.Context(), r.PathValue("id"), actor(r))
}
