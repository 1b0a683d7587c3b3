package lifecycle

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/redact"
	"github.com/paddock-dev/paddock/webhook"
)

// WebhookConfig is one webhook (a [[webhook]] of paddock.toml, checked):
// the notices of Events (all if empty) are posted to URL, signed with
// Secret.
type WebhookConfig struct {
	Name   string
	URL    string
	Events []string
	Secret []byte
}

// wants reports whether the webhook is told of notices of type typ.
func (h WebhookConfig) wants(typ string) bool {
	return len(h.Events) == 0 || slices.Contains(h.Events, typ)
}

// WebhookTiming paces deliveries; a zero field takes its default.
type WebhookTiming struct {
	// FirstRetry is the wait after a notice's first failed attempt, which
	// doubles at each next one up to MaxRetry (each wait between half and
	// all of it, at random: jitter); defaults 1s and 5m.
	FirstRetry, MaxRetry time.Duration
	// Timeout bounds each attempt (default webhook.AttemptTimeout, 10s).
	Timeout time.Duration
	// Poll is how often the notices are read when nothing woke the
	// deliverer (another node's appends; default 3s).
	Poll time.Duration
	// Lease is how long a webhook's delivery lease lasts (default 30s),
	// renewed every third of it while this daemon delivers.
	Lease time.Duration
}

func (t WebhookTiming) withDefaults() WebhookTiming {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&t.FirstRetry, time.Second)
	def(&t.MaxRetry, 5*time.Minute)
	def(&t.Timeout, webhook.AttemptTimeout)
	def(&t.Poll, 3*time.Second)
	def(&t.Lease, 30*time.Second)
	return t
}

// Webhooks delivers the notices (the store's outbox of notable events) to
// the configured webhooks, at least once and in order per webhook, and
// serves them masked to the firehose (GET /v1/events/stream). Each
// webhook has a goroutine of the service's lifetime, which delivers while
// this daemon holds the webhook's lease in the store (on several nodes,
// one at a time) and advances the webhook's cursor only after a 2xx: a
// restart, here or on another node, goes on from the cursor.
type Webhooks struct {
	*kernel
	life   *lifetime
	sender *webhook.Sender
	timing WebhookTiming
	// owner names this daemon in the webhooks' leases: its node, or, on
	// a daemon of its own (the only one on its state), "local", so that a
	// restart takes its lease back at once.
	owner string
}

// start makes each webhook's cursor (at the last notice: a webhook is
// told of the notices made from its first start on) and starts its
// deliverer.
func (wh *Webhooks) start() {
	if len(wh.Webhooks) == 0 {
		return
	}
	wh.timing = wh.WebhookTiming.withDefaults()
	wh.sender = webhook.NewSender()
	wh.sender.Timeout = wh.timing.Timeout
	wh.owner = wh.selfNode()
	if wh.owner == "" {
		wh.owner = "local"
	}
	ctx := wh.life.ctx
	now := time.Now().UTC()
	if err := wh.Store.Update(ctx, func(tx paddock.Tx) error {
		for _, h := range wh.Webhooks {
			if _, _, err := tx.Webhooks().Lease(ctx, h.Name, wh.owner, now, now); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		wh.log().Error("webhooks: cannot make their cursors; each deliverer tries again", "err", err)
	}
	for _, h := range wh.Webhooks {
		wh.life.goBackground(func() { wh.deliver(h) })
	}
}

// deliver runs webhook h's deliveries until the service stops.
func (wh *Webhooks) deliver(h WebhookConfig) {
	ctx := wh.life.ctx
	log := wh.log().With("webhook", h.Name)
	d := &deliverer{Webhooks: wh, h: h}
	for ctx.Err() == nil {
		wake := wh.waitChan()
		wait, err := d.step(ctx)
		if err != nil && ctx.Err() == nil {
			log.Error("webhook: delivery state unreadable; trying again", "err", err)
		}
		if wait == 0 {
			continue
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
		case <-t.C:
		case <-d.wake(wake):
		}
		t.Stop()
	}
	wh.sender.CloseIdle() // no connection outlives the Manager
	// Give the lease back, so that another node takes over at once.
	bg := context.WithoutCancel(ctx)
	now := time.Now().UTC()
	if err := wh.Store.Update(bg, func(tx paddock.Tx) error {
		_, _, err := tx.Webhooks().Lease(bg, h.Name, wh.owner, now, now)
		return err
	}); err != nil {
		log.Warn("webhook: giving its lease back failed; it expires by itself", "err", err)
	}
}

// deliverer is one webhook's delivery state in memory: the notice being
// retried, how many times, and when next.
type deliverer struct {
	*Webhooks
	h       WebhookConfig
	retry   int64 // the notice being retried, 0 if none
	fails   int   // its failed attempts since this daemon started
	retryAt time.Time
	renewAt time.Time // when the lease is renewed next
	// held: this daemon held the lease at its last renewal; delivered is
	// then the cursor.
	held      bool
	delivered int64
}

// wake is ch while the deliverer waits for a notice, nil (never) while
// it waits to retry one: a new notice does not hurry a retry.
func (d *deliverer) wake(ch <-chan struct{}) <-chan struct{} {
	if d.retry != 0 {
		return nil
	}
	return ch
}

// step renews the lease when it is due, delivers what it can, and says
// how long to wait before the next step (0: at once). While it holds the
// lease it keeps the cursor in memory (only the holder moves it): a wake
// with nothing new costs one read, no write.
func (d *deliverer) step(ctx context.Context) (time.Duration, error) {
	now := time.Now()
	if !d.held || !now.Before(d.renewAt) {
		if err := d.lease(ctx, now); err != nil {
			return d.timing.Poll, err
		}
	}
	if !d.held {
		d.retry, d.fails = 0, 0
		return d.timing.Poll, nil
	}
	if d.retry != 0 && now.Before(d.retryAt) {
		return min(d.retryAt.Sub(now), time.Until(d.renewAt)), nil
	}
	var ns []*paddock.Notice
	if err := d.Store.View(ctx, func(tx paddock.Tx) (err error) {
		ns, err = tx.Notices(ctx, d.delivered, 100)
		return err
	}); err != nil {
		return d.timing.Poll, err
	}
	skipped := int64(0)
	for _, n := range ns {
		if !d.h.wants(n.Type) {
			skipped = n.ID
			continue
		}
		if !time.Now().Before(d.renewAt) {
			return 0, nil // renew the lease before the next attempt
		}
		if !d.attempt(ctx, n) {
			return min(time.Until(d.retryAt), time.Until(d.renewAt)), nil
		}
		skipped = 0
	}
	if skipped != 0 {
		if err := d.advance(ctx, skipped); err != nil {
			return d.timing.Poll, err
		}
	}
	if len(ns) == 100 {
		return 0, nil
	}
	return min(d.timing.Poll, time.Until(d.renewAt)), nil
}

// lease takes or renews the webhook's lease (renewed when a third of it
// has gone by) and reads the cursor with it.
func (d *deliverer) lease(ctx context.Context, now time.Time) error {
	var cur *paddock.WebhookCursor
	var held bool
	err := d.Store.Update(ctx, func(tx paddock.Tx) (err error) {
		cur, held, err = tx.Webhooks().Lease(ctx, d.h.Name, d.owner, now.UTC(), now.Add(d.timing.Lease).UTC())
		return err
	})
	if err != nil {
		d.held = false
		return err
	}
	d.held, d.delivered = held, cur.Delivered
	d.renewAt = now.Add(d.timing.Lease / 3)
	return nil
}

// advance moves the cursor past notices it skips.
func (d *deliverer) advance(ctx context.Context, id int64) error {
	err := d.Store.Update(ctx, func(tx paddock.Tx) error { return tx.Webhooks().Advance(ctx, d.h.Name, d.owner, id) })
	if err != nil {
		d.held = false // the next step sees whose lease it is
		return err
	}
	d.delivered = id
	return nil
}

// attempt posts notice n once, records the attempt, and on a 2xx
// advances the cursor past n. It reports whether n was delivered; if not,
// when to try again is set.
func (d *deliverer) attempt(ctx context.Context, n *paddock.Notice) bool {
	log := d.log().With("webhook", d.h.Name, "notice", n.ID, "type", n.Type, "run", n.RunID)
	masked, err := d.masked(ctx, n, map[string]*redact.Redactor{})
	var body []byte
	if err == nil {
		body, err = json.Marshal(masked)
	}
	if err != nil {
		log.Error("webhook: reading or encoding the notice failed; trying again", "err", err)
		d.retry, d.retryAt = n.ID, time.Now().Add(d.timing.Poll)
		return false
	}
	began := time.Now()
	status, sendErr := d.sender.Send(ctx, webhook.Delivery{URL: d.h.URL, Secret: d.h.Secret,
		ID: strconv.FormatInt(n.ID, 10), Type: n.Type, Body: body})
	d.observer().WebhookAttempt(d.h.Name, sendErr == nil, time.Since(began))
	a := &paddock.WebhookAttempt{Webhook: d.h.Name, Notice: n.ID, Time: time.Now().UTC(), Status: status, Delivered: sendErr == nil}
	if sendErr != nil {
		a.Error = sendErr.Error()
	}
	// Recorded whatever becomes of the daemon: the receiver may have it.
	bg := context.WithoutCancel(ctx)
	lost := false
	err = d.Store.Update(bg, func(tx paddock.Tx) error {
		if err := tx.Webhooks().RecordAttempt(bg, a); err != nil || !a.Delivered {
			return err
		}
		err := tx.Webhooks().Advance(bg, d.h.Name, d.owner, n.ID)
		if paddock.IsCode(err, paddock.CodeConflict) {
			lost = true // another daemon took the lease: it delivers n again
			return nil
		}
		return err
	})
	if err != nil {
		log.Error("webhook: recording the attempt failed", "attempt", a.Attempt, "delivered", a.Delivered, "err", err)
	}
	if lost || err != nil {
		d.held = false // the next step sees whose lease it is, and where the cursor is
	}
	if sendErr == nil && err == nil {
		d.retry, d.fails = 0, 0
		d.delivered = n.ID
		return !lost
	}
	if d.retry != n.ID {
		d.retry, d.fails = n.ID, 0
	}
	d.fails++
	wait := backoff(d.timing.FirstRetry, d.timing.MaxRetry, d.fails)
	d.retryAt = time.Now().Add(wait)
	if sendErr != nil {
		log.Warn("webhook: delivery failed; trying again", "attempt", a.Attempt, "status", status, "err", sendErr, "retry_in", wait.Round(time.Millisecond))
	}
	return false
}

// backoff is the wait after the fails-th failed attempt: first doubled
// each time up to most, then a random part of its second half taken off.
func backoff(first, most time.Duration, fails int) time.Duration {
	d := first
	for i := 1; i < fails && d < most; i++ {
		d *= 2
	}
	d = min(d, most)
	return d - rand.N(d/2+1)
}

// masked is n with its data masked as the run's own answers are: the
// run's declared secrets and every credential shape. reds keeps the
// redactors of the runs met so far (a batch of notices reads each run
// once). A run that cannot be read fails it: nothing goes out unmasked
// for want of its secrets (a run gone since gets the shapes masked).
func (wh *Webhooks) masked(ctx context.Context, n *paddock.Notice, reds map[string]*redact.Redactor) (*paddock.Notice, error) {
	red, ok := reds[n.RunID]
	if !ok {
		var r *paddock.Run
		err := wh.Store.View(ctx, func(tx paddock.Tx) (err error) { r, err = tx.Run(ctx, n.RunID); return err })
		switch {
		case err == nil:
			red = wh.redactor(r)
		case !paddock.IsCode(err, paddock.CodeNotFound):
			return nil, err
		}
		reds[n.RunID] = red // nil: shapes only
	}
	c := *n
	if len(n.Data) > 0 {
		data := red.Bytes(n.Data)
		if !json.Valid(data) { // a mask cut through JSON's own syntax
			data, _ = json.Marshal(string(data))
		}
		c.Data = data
	}
	return &c, nil
}

// Notices returns up to limit notices after id after, across runs,
// masked; the firehose's read.
func (wh *Webhooks) Notices(ctx context.Context, after int64, limit int) (ns []*paddock.Notice, err error) {
	if limit <= 0 || limit > 1000 {
		limit = 1000
	}
	err = wh.Store.View(ctx, func(tx paddock.Tx) error {
		ns, err = tx.Notices(ctx, after, limit)
		return err
	})
	if err != nil {
		return nil, err
	}
	reds := map[string]*redact.Redactor{}
	for i, n := range ns {
		if ns[i], err = wh.masked(ctx, n, reds); err != nil {
			return nil, err
		}
	}
	return ns, nil
}

// WaitNotices is Notices, but when there are none yet it waits for the
// next append (here, or on another node) until ctx ends, then returns
// what there is (possibly nothing).
func (wh *Webhooks) WaitNotices(ctx context.Context, after int64, limit int) ([]*paddock.Notice, error) {
	for {
		ch := wh.waitChan()
		ns, err := wh.Notices(ctx, after, limit)
		if err != nil && ctx.Err() != nil {
			return nil, nil // the wait ended while the read ran: nothing yet
		}
		if err != nil || len(ns) > 0 {
			return ns, err
		}
		poll := time.NewTimer(3 * time.Second) // another node's append, if its wake-up was missed
		select {
		case <-ch:
		case <-poll.C:
		case <-ctx.Done():
			poll.Stop()
			return ns, nil
		}
		poll.Stop()
	}
}

// Attempts returns up to limit of webhook name's latest delivery
// attempts, oldest first.
func (wh *Webhooks) Attempts(ctx context.Context, name string, limit int) (as []*paddock.WebhookAttempt, err error) {
	err = wh.Store.View(ctx, func(tx paddock.Tx) error {
		as, err = tx.Webhooks().Attempts(ctx, name, limit)
		return err
	})
	return as, err
}
