// Package webhook signs paddock's webhook deliveries, verifies them (for a
// receiver written in Go), and sends them (for the daemon).
//
// A delivery is a POST of a JSON body (a paddock.Notice) with three
// headers:
//
//	Paddock-Event-Id:   the notice's id, the same on every attempt: a
//	                    receiver de-duplicates by it
//	Paddock-Event-Type: the notice's type, such as changeset.submitted
//	Paddock-Signature:  t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>." + body)>
//
// as GitHub and Stripe sign theirs: the timestamp is signed with the body,
// so a receiver that refuses old timestamps (Verify's tolerance) refuses a
// replayed delivery. docs/WEBHOOKS.md shows a verification in Go, Python
// and the shell. Standard library only, so that a receiver importing it
// pulls in nothing else.
package webhook

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// The headers of a delivery.
const (
	SignatureHeader = "Paddock-Signature"
	EventIDHeader   = "Paddock-Event-Id"
	EventTypeHeader = "Paddock-Event-Type"
)

// DefaultTolerance is how old a signature's timestamp Verify accepts when
// given no tolerance.
const DefaultTolerance = 5 * time.Minute

// Sign returns the Paddock-Signature header of body signed with secret at t.
func Sign(secret []byte, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac(secret, ts, body))
}

func mac(secret []byte, ts string, body []byte) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte(ts))
	h.Write([]byte("."))
	h.Write(body)
	return h.Sum(nil)
}

// Errors Verify returns.
var (
	ErrNoSignature = errors.New("webhook: no valid Paddock-Signature header")
	ErrSignature   = errors.New("webhook: the signature does not match the body")
	ErrTooOld      = errors.New("webhook: the signature's timestamp is outside the tolerance")
)

// Verify checks a delivery: header is its Paddock-Signature, body its
// bytes as received (before any decoding). It accepts the header if one of
// its v1 signatures is the HMAC-SHA256 of "<t>." + body with secret, and
// t is within tolerance of now, either way (DefaultTolerance if
// tolerance is 0; a negative one accepts any time). The comparison takes
// the same time whatever the signature holds.
func Verify(secret []byte, header string, body []byte, tolerance time.Duration) error {
	return verifyAt(secret, header, body, tolerance, time.Now())
}

func verifyAt(secret []byte, header string, body []byte, tolerance time.Duration, now time.Time) error {
	var ts string
	var sigs [][]byte
	for part := range strings.SplitSeq(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			continue
		}
		switch k {
		case "t":
			ts = v
		case "v1":
			if b, err := hex.DecodeString(v); err == nil {
				sigs = append(sigs, b)
			}
		}
	}
	secs, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(sigs) == 0 {
		return ErrNoSignature
	}
	want := mac(secret, ts, body)
	ok := false
	for _, s := range sigs {
		if hmac.Equal(s, want) {
			ok = true
		}
	}
	if !ok {
		return ErrSignature
	}
	if tolerance == 0 {
		tolerance = DefaultTolerance
	}
	if tolerance > 0 {
		if d := now.Sub(time.Unix(secs, 0)); d > tolerance || d < -tolerance {
			return ErrTooOld
		}
	}
	return nil
}

// Sender posts deliveries. Its zero value is not usable: make one with
// NewSender.
type Sender struct {
	client *http.Client
	// Timeout bounds each attempt, from the connection to the answer's
	// end (the body read is capped at 64 KiB).
	Timeout time.Duration
	// UserAgent is sent with each delivery.
	UserAgent string
}

// AttemptTimeout is a Sender's default Timeout.
const AttemptTimeout = 10 * time.Second

// NewSender makes a Sender whose client follows no redirect (a 3xx is an
// answer, and not a 2xx) and uses the proxy the environment names.
func NewSender() *Sender {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	return &Sender{Timeout: AttemptTimeout, UserAgent: "paddock-webhook", client: &http.Client{
		Transport:     tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// Delivery is one notice to send to one receiver.
type Delivery struct {
	URL    string
	Secret []byte
	ID     string // Paddock-Event-Id
	Type   string // Paddock-Event-Type
	Body   []byte
}

// Send makes one attempt: it signs d's body now and posts it. It returns
// the answer's status (0 if none came) and, when the status is not 2xx or
// none came, an error saying why.
func (s *Sender) Send(ctx context.Context, d Delivery) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, s.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.URL, bytes.NewReader(d.Body))
	if err != nil {
		return 0, fmt.Errorf("webhook: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", s.UserAgent)
	req.Header.Set(EventIDHeader, d.ID)
	req.Header.Set(EventTypeHeader, d.Type)
	req.Header.Set(SignatureHeader, Sign(d.Secret, time.Now(), d.Body))
	resp, err := s.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the URL, which may hold a token
		}
		return 0, fmt.Errorf("webhook: %w", err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // lets the connection be used again
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, fmt.Errorf("webhook: the receiver answered %s", resp.Status)
	}
	return resp.StatusCode, nil
}

// CloseIdle closes the Sender's idle connections.
func (s *Sender) CloseIdle() { s.client.CloseIdleConnections() }
