// Package client is the typed Go client of paddock's /v1 API, used by the
// CLI and by orchestrators. Errors from the daemon come back as
// *paddock.Error with the daemon's code and public message; a daemon that
// cannot be reached gives an error for which Unreachable is true.
package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mathrand "math/rand/v2"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/paddock-dev/paddock"
)

// Client talks to one daemon. It is paddock.Service over the API.
type Client struct {
	network string // "unix" or "tcp"
	address string // the socket's path, or host:port
	host    string // the Host of its requests: "paddock" on a unix socket, the address on TCP
	token   string
	agent   bool                      // calls made for a run's agent (ForAgent)
	observe func(method, path string) // WithObserver
	idle    time.Duration             // WithTimeout
	reach   *reachHook                // OnUnreachable
	retries int                       // WithRetries
}

// reachHook is OnUnreachable's function, run once for a client and all
// its copies, and only while none of their requests has reached the
// daemon.
type reachHook struct {
	fn      func(ctx context.Context, err error) error
	mu      sync.Mutex
	running chan struct{} // closed when the run under way ends
	done    bool
	err     error
	reached atomic.Bool // a request connected: a daemon was there
}

// handle runs fn, or waits for the run under way, and gives its result.
// A request waiting for another's run gives up when its own ctx ends; a
// run that failed because its caller's ctx ended does not stand for the
// requests after it, which have contexts of their own: the next runs fn
// again. Once a request has reached the daemon, err is returned as it
// is: that daemon stopped since, and whoever stopped it is not overruled
// by a later request that starts another.
func (h *reachHook) handle(ctx context.Context, err error) error {
	if h.reached.Load() {
		return err
	}
	for {
		h.mu.Lock()
		if h.done {
			h.mu.Unlock()
			return h.err
		}
		if running := h.running; running != nil {
			h.mu.Unlock()
			select {
			case <-running:
				continue
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return h.run(ctx, err)
	}
}

// run calls fn as the run under way, and keeps its result unless its
// caller's ctx ended (a panic in fn ends the run, so that none waits for
// it for good).
func (h *reachHook) run(ctx context.Context, err error) (herr error) {
	running := make(chan struct{})
	h.running = running
	h.mu.Unlock()
	ok := false
	defer func() {
		h.mu.Lock()
		if ok && (herr == nil || ctx.Err() == nil) {
			h.done, h.err = true, herr
		}
		h.running = nil
		h.mu.Unlock()
		close(running)
	}()
	herr = h.fn(ctx, err)
	ok = true
	return herr
}

var _ paddock.Service = (*Client)(nil)

// Unix returns a client for the daemon listening on the unix socket at path.
func Unix(path string) *Client {
	return &Client{network: "unix", address: path, host: "paddock", retries: DefaultRetries}
}

// TCP returns a client for a daemon on a loopback address such as
// 127.0.0.1:7070, authenticating with token. It connects to addr itself:
// no HTTP proxy of the environment is used.
func TCP(addr, token string) *Client {
	return &Client{network: "tcp", address: addr, host: addr, token: token, retries: DefaultRetries}
}

// unreachableError wraps a failure to reach the daemon at all.
type unreachableError struct{ err error }

func (e *unreachableError) Error() string { return "paddock daemon unreachable: " + e.err.Error() }
func (e *unreachableError) Unwrap() error { return e.err }

// transportError says what failed on the way to or from the daemon: the
// request (what), and the cause. It carries no "paddock:" prefix: whoever
// prints it adds its own.
func transportError(what string, err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%s: the daemon closed the connection without finishing its answer (did it stop? see its log): %w", what, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// Unreachable reports whether err means no daemon answered (nothing listens
// on the socket or port).
func Unreachable(err error) bool {
	var u *unreachableError
	return errors.As(err, &u)
}

type envelope struct {
	OK    bool            `json:"ok"`
	Data  json.RawMessage `json:"data"`
	Error *paddock.Error  `json:"error"`
}

func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		if err := notUTF8(in); err != nil {
			return err
		}
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
		return c.doRaw(ctx, method, path, body, "application/json", out)
	}
	return c.doRaw(ctx, method, path, nil, "", out)
}

func (c *Client) doRaw(ctx context.Context, method, path string, body io.Reader, contentType string, out any) error {
	resp, err := c.send(ctx, method, path, body, contentType)
	if err != nil {
		return err
	}
	defer resp.body.Close()
	ok, err := decodeAnswer(resp.body, out)
	if err != nil {
		return fmt.Errorf("%s %s: status %d with an unreadable answer: %w", method, path, resp.status, err)
	}
	if !ok {
		return fmt.Errorf("%s %s: status %d without an error", method, path, resp.status)
	}
	return nil
}

// decodeAnswer reads a successful answer's envelope and decodes its data
// into out (a pointer, or nil to skip it) as it reads: one pass over it.
// (Read whole first and decoded again, a change set's inlined diff of 2
// MB was scanned three times, 20 ms and more.) Data that is null or left
// out leaves out as it was; a json.RawMessage is given the data's text as
// it is, null included. It reports the envelope's ok.
func decodeAnswer(r io.Reader, out any) (bool, error) {
	if v := reflect.ValueOf(out); out != nil && (v.Kind() != reflect.Pointer || v.IsNil()) {
		return false, fmt.Errorf("the answer's data cannot be decoded into a %T, only through a pointer", out)
	}
	if rm, isRaw := out.(*json.RawMessage); isRaw || out == nil {
		var env struct {
			OK   bool            `json:"ok"`
			Data json.RawMessage `json:"data"`
		}
		if err := json.NewDecoder(r).Decode(&env); err != nil {
			return false, err
		}
		if rm != nil && env.OK {
			*rm = env.Data
		}
		return env.OK, nil
	}
	env := answer{Data: out}
	if err := json.NewDecoder(r).Decode(&env); err != nil {
		return false, err
	}
	return env.OK, nil
}

// answer is a successful answer's envelope, its data decoded into the
// value Data points to.
type answer struct {
	OK   bool `json:"ok"`
	Data any  `json:"data"`
}

// request sends a request with body (nil: none) and these headers, and
// returns the answer, whatever its status, for its caller to read and
// close. what names the request in errors.
func (c *Client) request(ctx context.Context, what, method, path string, body io.Reader, header ...[2]string) (*wireResponse, error) {
	req := &wireRequest{method: method, path: path, body: body, size: -1, header: header, idle: c.idle}
	switch b := body.(type) {
	case *bytes.Reader:
		req.size = int64(b.Len())
	case *strings.Reader:
		req.size = int64(b.Len())
	}
	if c.token != "" {
		req.header = append(req.header, [2]string{"Authorization", "Bearer " + c.token})
	}
	if c.agent {
		req.header = append(req.header, [2]string{paddock.AgentHeader, "1"})
	}
	if c.observe != nil {
		c.observe(method, path)
	}
	resp, err := roundTrip(ctx, c.network, c.address, c.host, req)
	if err != nil && c.reach != nil && Unreachable(err) {
		// Nothing of the request was sent: the connection was never made.
		if herr := c.reach.handle(ctx, err); herr != nil {
			return nil, herr
		}
		resp, err = roundTrip(ctx, c.network, c.address, c.host, req)
	}
	if c.reach != nil && err == nil {
		c.reach.reached.Store(true) // a daemon answered
	}
	if err != nil {
		if Unreachable(err) || ctx.Err() != nil {
			return nil, err
		}
		return nil, transportError(what, err)
	}
	return resp, nil
}

// answerError decodes the error an answer that is not a success carries,
// and closes its body.
func answerError(what string, resp *wireResponse) error {
	defer resp.body.Close()
	var env envelope
	if err := json.NewDecoder(io.LimitReader(resp.body, 16<<20)).Decode(&env); err != nil {
		return fmt.Errorf("%s: status %d with an unreadable answer: %w", what, resp.status, err)
	}
	if env.Error == nil {
		return fmt.Errorf("%s: status %d without an error", what, resp.status)
	}
	return env.Error
}

// send makes a request and returns a successful answer for its caller to
// read; an answer that is not a success is decoded into its error. A
// call whose error says nothing of it was done (paddock.Undone: a node
// that holds the run could not be reached, or this one could not reach
// the shared store before it began) is made again, up to c.retries times,
// waiting longer each time, while ctx lasts and the body can be read
// again; so is a write, which carries an idempotency key (keys.go), whose
// answer was lost or that is still being made.
func (c *Client) send(ctx context.Context, method, path string, body io.Reader, contentType string) (*wireResponse, error) {
	var header [][2]string
	if contentType != "" {
		header = append(header, [2]string{"Content-Type", contentType})
	}
	keyed := keyedMethod(method) && keyable(body) && !isRead(ctx)
	if keyed {
		header = append(header, [2]string{paddock.IdempotencyHeader, callKey(ctx)})
	}
	lostRetried := keyed || isRead(ctx) // a read is made again as a keyed call is
	what := method + " " + strings.TrimSuffix(path, "?")
	for attempt := 0; ; attempt++ {
		resp, err := c.request(ctx, what, method, path, body, header...)
		if err != nil {
			// A keyed write whose connection broke once it was sent is
			// made again: its key makes it once.
			if !lostRetried || Unreachable(err) || ctx.Err() != nil || attempt >= c.retries || !rewind(body) || !sleepCtx(ctx, retryWait(attempt)) {
				return nil, err
			}
			continue
		}
		if resp.status < 300 {
			return resp, nil
		}
		err = answerError(what, resp)
		if attempt >= c.retries || !retryable(err, lostRetried) || !rewind(body) || !sleepCtx(ctx, retryWait(attempt)) {
			return nil, err
		}
	}
}

// DefaultRetries is how many times a client makes a call again whose
// error says nothing of it was done (see WithRetries).
const DefaultRetries = 4

// WithRetries returns a copy of c that makes a call again up to n times
// (0: never) when its error says that nothing of it was done
// (paddock.DetailDone), or, for a write (which carries an idempotency key,
// keys.go), when its answer was lost or it is still being made, waiting
// 250ms, then twice as long each time up to 2s, a fifth more or less at
// random. Another call whose answer was lost (a write without a key: a
// stream, a file's upload) is not made again.
func (c *Client) WithRetries(n int) *Client {
	cp := *c
	cp.retries = max(n, 0)
	return &cp
}

// retryWait is how long to wait before the attempt after attempt.
func retryWait(attempt int) time.Duration {
	d := min(250*time.Millisecond<<attempt, 2*time.Second)
	return d + time.Duration(mathrand.Int64N(int64(d)*2/5)) - d/5
}

// rewind puts a request's body back at its start, if it can be read
// again: none, or one in memory.
func rewind(body io.Reader) bool {
	switch b := body.(type) {
	case nil:
		return true
	case io.Seeker:
		_, err := b.Seek(0, io.SeekStart)
		return err == nil
	}
	return false
}

// sleepCtx waits d, or until ctx ends (false).
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// Health checks that the daemon answers.
func (c *Client) Health(ctx context.Context) error {
	return c.do(ctx, "GET", "/healthz", nil, nil)
}

// Status describes the daemon.
func (c *Client) Status(ctx context.Context) (*paddock.DaemonStatus, error) {
	var s paddock.DaemonStatus
	return &s, c.do(ctx, "GET", "/v1/status", nil, &s)
}

// Doctor asks the daemon what it can enforce on this machine, probed in its
// own process (the one that builds every sandbox).
func (c *Client) Doctor(ctx context.Context) (*paddock.DoctorReport, error) {
	var d paddock.DoctorReport
	return &d, c.do(ctx, "GET", "/v1/doctor", nil, &d)
}

// AddProject declares a project.
func (c *Client) AddProject(ctx context.Context, req paddock.AddProjectRequest) (*paddock.Project, error) {
	var p paddock.Project
	return &p, c.do(ctx, "POST", "/v1/projects", req, &p)
}

// Projects lists the projects.
func (c *Client) Projects(ctx context.Context) ([]*paddock.Project, error) {
	var ps []*paddock.Project
	return ps, c.do(ctx, "GET", "/v1/projects", nil, &ps)
}

// Project returns one project.
func (c *Client) Project(ctx context.Context, name string) (*paddock.Project, error) {
	var p paddock.Project
	return &p, c.do(ctx, "GET", "/v1/projects/"+url.PathEscape(name), nil, &p)
}

// SetProject changes a project's settings; those req leaves out keep their values.
func (c *Client) SetProject(ctx context.Context, name string, req paddock.SetProjectRequest) (*paddock.Project, error) {
	var p paddock.Project
	return &p, c.do(ctx, "PATCH", "/v1/projects/"+url.PathEscape(name), req, &p)
}

// RemoveProject forgets a project.
func (c *Client) RemoveProject(ctx context.Context, name string) error {
	return c.do(ctx, "DELETE", "/v1/projects/"+url.PathEscape(name), nil, nil)
}

// Unlock force-releases a project's lock.
func (c *Client) Unlock(ctx context.Context, name string, force bool) (*paddock.UnlockResult, error) {
	var res paddock.UnlockResult
	return &res, c.do(ctx, "POST", "/v1/projects/"+url.PathEscape(name)+"/unlock", paddock.UnlockRequest{Force: force}, &res)
}

// Create makes a run and its workspace.
func (c *Client) Create(ctx context.Context, req paddock.CreateRunRequest) (*paddock.Run, error) {
	var r paddock.Run
	return &r, c.do(ctx, "POST", "/v1/runs", req, &r)
}

// Runs lists runs, of one project if f.Project is set, removed ones too
// if f.Removed.
func (c *Client) Runs(ctx context.Context, f paddock.RunFilter) ([]*paddock.Run, error) {
	q := url.Values{}
	if f.Project != "" {
		q.Set("project", f.Project)
	}
	if f.Removed {
		q.Set("all", "true")
	}
	var rs []*paddock.Run
	return rs, c.do(ctx, "GET", "/v1/runs?"+q.Encode(), nil, &rs)
}

// Run returns one run.
func (c *Client) Run(ctx context.Context, id string) (*paddock.Run, error) {
	var r paddock.Run
	return &r, c.do(ctx, "GET", "/v1/runs/"+url.PathEscape(id), nil, &r)
}

func (c *Client) runAction(ctx context.Context, id, action string, in any) (*paddock.Run, error) {
	var r paddock.Run
	return &r, c.do(ctx, "POST", "/v1/runs/"+url.PathEscape(id)+"/"+action, in, &r)
}

// Retain keeps a run's workspace for good.
func (c *Client) Retain(ctx context.Context, id string) (*paddock.Run, error) {
	return c.runAction(ctx, id, "retain", nil)
}

// Review makes (or finds) the review run of run id's submitted change set.
func (c *Client) Review(ctx context.Context, id, agent string) (*paddock.Run, error) {
	return c.runAction(ctx, id, "review", paddock.ReviewRequest{Agent: agent})
}

// Fork freezes overlay run id's files into a layer and makes req.Count
// runs stacked on it.
func (c *Client) Fork(ctx context.Context, id string, req paddock.ForkRequest) (*paddock.ForkResult, error) {
	var res paddock.ForkResult
	return &res, c.do(ctx, "POST", "/v1/runs/"+url.PathEscape(id)+"/fork", req, &res)
}

// StartFlow starts a workflow's flow.
func (c *Client) StartFlow(ctx context.Context, req paddock.StartFlowRequest) (*paddock.Flow, error) {
	var f paddock.Flow
	return &f, c.do(ctx, "POST", "/v1/flows", req, &f)
}

// Flows lists a project's flows (all, if project is empty).
func (c *Client) Flows(ctx context.Context, project string) ([]*paddock.Flow, error) {
	var fs []*paddock.Flow
	q := ""
	if project != "" {
		q = "?project=" + url.QueryEscape(project)
	}
	return fs, c.do(ctx, "GET", "/v1/flows"+q, nil, &fs)
}

// Flow returns a flow, with its log.
func (c *Client) Flow(ctx context.Context, id string) (*paddock.Flow, error) {
	var f paddock.Flow
	return &f, c.do(ctx, "GET", "/v1/flows/"+url.PathEscape(id), nil, &f)
}

// PickEvent takes an event from run id's menu.
func (c *Client) PickEvent(ctx context.Context, id, event string, req paddock.MenuEventRequest) (*paddock.Flow, error) {
	var f paddock.Flow
	return &f, c.do(ctx, "POST", "/v1/runs/"+url.PathEscape(id)+"/menu/"+url.PathEscape(event), req, &f)
}

// Reject discards a run's result.
func (c *Client) Reject(ctx context.Context, id string) (*paddock.Run, error) {
	return c.runAction(ctx, id, "reject", nil)
}

// Checkpoint records a run's workspace state and detaches its session.
func (c *Client) Checkpoint(ctx context.Context, id, reason string) (*paddock.Run, error) {
	return c.runAction(ctx, id, "checkpoint", paddock.CheckpointRequest{Reason: reason})
}

// Resume attaches a session to a run again.
func (c *Client) Resume(ctx context.Context, id string) (*paddock.ResumeResult, error) {
	var res paddock.ResumeResult
	return &res, c.do(ctx, "POST", "/v1/runs/"+url.PathEscape(id)+"/resume", nil, &res)
}

// Remove deletes a run's workspace and hides the run.
func (c *Client) Remove(ctx context.Context, id string) (*paddock.Run, error) {
	var r paddock.Run
	return &r, c.do(ctx, "DELETE", "/v1/runs/"+url.PathEscape(id), nil, &r)
}

// Events returns up to limit events after seq after.
func (c *Client) Events(ctx context.Context, id string, after int64, limit int) ([]*paddock.Event, error) {
	return c.events(ctx, id, after, limit, 0)
}

// maxWait is the longest the daemon holds an events request (httpapi.MaxWait).
const maxWait = 60 * time.Second

// WaitEvents is Events, but when there are none yet it waits for the next
// until ctx ends, then returns what there is (possibly nothing). The daemon
// holds each request up to a minute; WaitEvents asks again until ctx ends.
func (c *Client) WaitEvents(ctx context.Context, id string, after int64, limit int) ([]*paddock.Event, error) {
	for {
		wait := maxWait
		if dl, ok := ctx.Deadline(); ok {
			wait = min(wait, time.Until(dl))
		}
		if wait <= 0 || ctx.Err() != nil {
			return nil, nil
		}
		evs, err := c.events(ctx, id, after, limit, wait)
		switch {
		case err != nil && ctx.Err() != nil:
			return nil, nil // ctx ended while the daemon waited: nothing came
		case err != nil || len(evs) > 0:
			return evs, err
		}
	}
}

// events asks for events; with wait > 0 an empty answer is held by the
// daemon until an event arrives or wait passes.
func (c *Client) events(ctx context.Context, id string, after int64, limit int, wait time.Duration) ([]*paddock.Event, error) {
	q := url.Values{"after": {strconv.FormatInt(after, 10)}}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if wait > 0 {
		q.Set("wait", wait.String())
	}
	var evs []*paddock.Event
	return evs, c.do(ctx, "GET", "/v1/runs/"+url.PathEscape(id)+"/events?"+q.Encode(), nil, &evs)
}

// GC reconciles records and disk; with dryRun it only reports.
func (c *Client) GC(ctx context.Context, dryRun bool) ([]paddock.Finding, error) {
	var f []paddock.Finding
	return f, c.do(ctx, "POST", "/v1/gc", paddock.GCRequest{DryRun: dryRun}, &f)
}

// Tools lists the working tools a run is offered, with their JSON schemas.
func (c *Client) Tools(ctx context.Context, id string) ([]ToolInfo, error) {
	var ts []ToolInfo
	return ts, c.do(ctx, "GET", "/v1/runs/"+url.PathEscape(id)+"/tools", nil, &ts)
}

// ToolInfo describes one working tool.
type ToolInfo struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Schema      json.RawMessage `json:"input_schema"`
	Writes      bool            `json:"writes"`
}

// CallTool runs a working tool in a run's workspace; args is its JSON object
// of arguments. The result is the tool's structured answer.
func (c *Client) CallTool(ctx context.Context, id, name string, args any) (json.RawMessage, error) {
	var out json.RawMessage
	if slices.Contains(readTools, name) {
		ctx = asRead(ctx)
	}
	return out, c.do(ctx, "POST", "/v1/runs/"+url.PathEscape(id)+"/tools/"+url.PathEscape(name), args, &out)
}

// Deliver uploads a file into a run's inbox (.paddock/inbox/ of its workspace).
// A body other than a *bytes.Reader or *strings.Reader is sent as it is
// read, beside the wait for the answer: when the daemon answers before its
// end (a refusal), the call returns without waiting for it, and a read of
// body under way then, which may end only when body has more to give, is
// the caller's to end (net/http would close body; this client never
// closes what it is given).
func (c *Client) Deliver(ctx context.Context, id, name string, body io.Reader) (*paddock.InboxResult, error) {
	var res paddock.InboxResult
	return &res, c.doRaw(ctx, "POST", "/v1/runs/"+url.PathEscape(id)+"/inbox?name="+url.QueryEscape(name), body, "application/octet-stream", &res)
}

// Exec runs a command in a run's workspace, confined, and returns its result.
func (c *Client) Exec(ctx context.Context, id string, req paddock.ExecRequest) (*paddock.ExecResult, error) {
	var res paddock.ExecResult
	return &res, c.do(ctx, "POST", "/v1/runs/"+url.PathEscape(id)+"/exec", req, &res)
}

// ExecStream runs a command like Exec, writing its output to stdout and
// stderr as it comes; the result it returns has no output of its own.
func (c *Client) ExecStream(ctx context.Context, id string, req paddock.ExecRequest, stdout, stderr io.Writer) (*paddock.ExecResult, error) {
	if err := notUTF8(req); err != nil {
		return nil, err
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	resp, err := c.request(ctx, "exec", "POST", runPath(id, "exec", "stream"), bytes.NewReader(body), [2]string{"Content-Type", "application/json"})
	if err != nil {
		return nil, err
	}
	if resp.header.Get("Content-Type") != "application/x-ndjson" {
		return nil, answerError("exec", resp)
	}
	defer resp.body.Close()
	dec := json.NewDecoder(resp.body)
	for {
		var line struct {
			Stream string              `json:"stream"`
			Data   []byte              `json:"data"`
			Result *paddock.ExecResult `json:"result"`
			Error  *paddock.Error      `json:"error"`
		}
		if err := dec.Decode(&line); err != nil {
			return nil, transportError("exec: the stream ended early", err)
		}
		switch {
		case line.Error != nil:
			return nil, line.Error
		case line.Result != nil:
			return line.Result, nil
		case line.Stream == "stdout" && stdout != nil:
			stdout.Write(line.Data)
		case line.Stream == "stderr" && stderr != nil:
			stderr.Write(line.Data)
		}
	}
}

// ExecAttach runs a command like ExecStream, attached (POST
// /v1/runs/{id}/exec/attach, an HTTP/1.1 upgrade): streams.Stdin is sent
// as it is read, its end as the end of stdin, and streams.Resize's sizes
// as the terminal's when req asks for one (req.Terminal). It returns when
// the daemon sends the result; a read of streams.Stdin that blocks is the
// caller's to end. Ending ctx drops the connection, which ends the command.
func (c *Client) ExecAttach(ctx context.Context, id string, req paddock.ExecRequest, streams paddock.ExecIO) (*paddock.ExecResult, error) {
	if err := notUTF8(req); err != nil {
		return nil, err
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	resp, err := c.request(ctx, "exec", "POST", runPath(id, "exec", "attach"), bytes.NewReader(body),
		[2]string{"Content-Type", "application/json"}, [2]string{"Connection", "Upgrade"}, [2]string{"Upgrade", paddock.AttachProtocol})
	if err != nil {
		return nil, err
	}
	if resp.status != 101 {
		return nil, answerError("exec", resp)
	}
	conn := resp.conn
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	var mu sync.Mutex
	send := func(kind byte, p []byte) error {
		mu.Lock()
		defer mu.Unlock()
		return paddock.WriteFrame(conn, kind, p)
	}
	done := make(chan struct{})
	defer close(done)
	if streams.Stdin != nil {
		go func() {
			buf := make([]byte, 32<<10)
			for {
				n, err := streams.Stdin.Read(buf)
				if n > 0 && send(paddock.FrameStdin, buf[:n]) != nil {
					return
				}
				if err != nil {
					if err == io.EOF {
						send(paddock.FrameEOF, nil)
					}
					return
				}
			}
		}()
	}
	if streams.Resize != nil {
		go func() {
			for {
				select {
				case sz, ok := <-streams.Resize:
					if !ok {
						return
					}
					b, _ := json.Marshal(sz)
					if send(paddock.FrameResize, b) != nil {
						return
					}
				case <-done:
					return
				}
			}
		}()
	}
	for {
		kind, p, err := paddock.ReadFrame(conn, paddock.MaxFrame)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, transportError("exec: the stream ended early", err)
		}
		switch kind {
		case paddock.FrameStdout:
			if streams.Stdout != nil {
				streams.Stdout.Write(p)
			}
		case paddock.FrameStderr:
			if streams.Stderr != nil {
				streams.Stderr.Write(p)
			}
		case paddock.FrameResult:
			var end paddock.AttachEnd
			if err := json.Unmarshal(p, &end); err != nil {
				return nil, fmt.Errorf("exec: an unreadable result: %w", err)
			}
			if end.Error != nil {
				return nil, end.Error
			}
			if end.Result == nil {
				return nil, fmt.Errorf("exec: the daemon ended without a result")
			}
			return end.Result, nil
		}
	}
}

// Follow streams a run's events from after seq after to fn, over SSE, until
// ctx ends or fn returns an error. It reconnects on its own where it left
// off (Last-Event-ID), so fn sees every event once, in order. A daemon
// that does not answer ends it with that error (Unreachable): at once
// when none ever did, and after followGrace of trying when the one that
// did went away (a restart is followed across, a kill -9 is reported).
func (c *Client) Follow(ctx context.Context, id string, after int64, fn func(*paddock.Event) error) error {
	return c.followSSE(ctx, "events", runPath(id, "events", "stream"), after, func(data []byte, after int64) (int64, error) {
		var e paddock.Event
		if err := json.Unmarshal(data, &e); err != nil {
			return 0, fmt.Errorf("events: %w", err)
		}
		if e.Seq <= after {
			return after, nil // already seen
		}
		if err := fn(&e); err != nil {
			return 0, stopError{err}
		}
		return e.Seq, nil
	})
}

// FollowNotices streams the notices of every run (GET /v1/events/stream,
// the operator's) from after notice id after to fn, as Follow does a
// run's events: every notice once, in order, across reconnections. With
// types, only notices of those types (paddock.NoticeTypes).
func (c *Client) FollowNotices(ctx context.Context, after int64, types []string, fn func(*paddock.Notice) error) error {
	path := "/v1/events/stream"
	if len(types) > 0 {
		path += "?types=" + url.QueryEscape(strings.Join(types, ","))
	}
	return c.followSSE(ctx, "notices", path, after, func(data []byte, after int64) (int64, error) {
		var n paddock.Notice
		if err := json.Unmarshal(data, &n); err != nil {
			return 0, fmt.Errorf("notices: %w", err)
		}
		if n.ID <= after {
			return after, nil // already seen
		}
		if err := fn(&n); err != nil {
			return 0, stopError{err}
		}
		return n.ID, nil
	})
}

// followSSE reads the stream at path from after on, reconnecting where it
// left off, until ctx ends or each fails with a stopError (its error is
// returned) or another: each takes an event's data and the id read up to,
// and returns the new one.
func (c *Client) followSSE(ctx context.Context, what, path string, after int64, each func(data []byte, after int64) (int64, error)) error {
	var gone time.Time // when the daemon stopped answering; zero while it answers
	followed := false
	for ctx.Err() == nil {
		err := c.follow(ctx, what, path, &after, each)
		var pe *paddock.Error
		var stop stopError
		switch {
		case errors.As(err, &stop):
			return stop.err
		case errors.As(err, &pe), ctx.Err() != nil:
			return err
		case Unreachable(err) && !followed:
			return err
		case Unreachable(err) && gone.IsZero():
			gone = time.Now()
		case Unreachable(err) && time.Since(gone) >= followGrace:
			return fmt.Errorf("%s: the daemon has not answered for %v: %w", what, followGrace, err)
		case !Unreachable(err):
			followed, gone = true, time.Time{}
		}
		select { // the connection dropped: reconnect
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
	return ctx.Err()
}

// followGrace is how long Follow keeps trying to reconnect to a daemon
// that no longer answers (a restart) before it gives up.
var followGrace = 10 * time.Second

// stopError carries the error fn returned, to end Follow with it.
type stopError struct{ err error }

func (e stopError) Error() string { return e.err.Error() }

func (c *Client) follow(ctx context.Context, what, path string, after *int64, each func(data []byte, after int64) (int64, error)) error {
	resp, err := c.request(ctx, what, "GET", path, nil,
		[2]string{"Last-Event-ID", strconv.FormatInt(*after, 10)}, [2]string{"Accept", "text/event-stream"})
	if err != nil {
		return err
	}
	if resp.status != 200 {
		return answerError(what, resp)
	}
	defer resp.body.Close()
	sc := bufio.NewScanner(resp.body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var data []byte
	for sc.Scan() {
		line := sc.Bytes()
		switch {
		case bytes.HasPrefix(line, []byte("data: ")):
			data = append(data[:0], line[6:]...)
		case len(line) == 0 && len(data) > 0:
			n, err := each(data, *after)
			if err != nil {
				return err
			}
			data = data[:0]
			*after = n
		}
	}
	return sc.Err()
}

// ChangeSet computes a run's change set now.
func (c *Client) ChangeSet(ctx context.Context, id string) (*paddock.ChangeSet, error) {
	return c.changeSet(ctx, "GET", "/v1/runs/"+url.PathEscape(id)+"/changeset", nil)
}

// changeSet makes a call that answers with a change set, and reads it in
// one pass (see paddock.ChangeSetWire).
func (c *Client) changeSet(ctx context.Context, method, path string, in any) (*paddock.ChangeSet, error) {
	var w paddock.ChangeSetWire
	if err := c.do(ctx, method, path, in, &w); err != nil {
		return &paddock.ChangeSet{}, err
	}
	cs, err := w.ChangeSet()
	if err != nil {
		return &paddock.ChangeSet{}, fmt.Errorf("%s %s: decode answer: %w", method, path, err)
	}
	return cs, nil
}

// ChangeSetDiff opens the whole diff of a run's change set, as the daemon
// streams it: the one with hash, or, with no hash, the change set as it is
// now. It returns the change set's hash; the caller closes the reader.
func (c *Client) ChangeSetDiff(ctx context.Context, id, hash string) (io.ReadCloser, string, error) {
	path := "/v1/runs/" + url.PathEscape(id) + "/changeset/diff"
	if hash != "" {
		path += "?hash=" + url.QueryEscape(hash)
	}
	resp, err := c.send(ctx, "GET", path, nil, "")
	if err != nil {
		return nil, "", err
	}
	return resp.body, resp.header.Get(paddock.ChangeSetHashHeader), nil
}

// CopyDiff streams the diff ChangeSetDiff opens to w, and returns the
// change set's hash.
func (c *Client) CopyDiff(ctx context.Context, id, hash string, w io.Writer) (string, error) {
	d, h, err := c.ChangeSetDiff(ctx, id, hash)
	if err != nil {
		return "", err
	}
	defer d.Close()
	if _, err := io.Copy(w, d); err != nil {
		return "", fmt.Errorf("reading the diff: %w", err)
	}
	return h, nil
}

// Submit freezes a run's change set as it is now.
func (c *Client) Submit(ctx context.Context, id string) (*paddock.ChangeSet, error) {
	return c.changeSet(ctx, "POST", "/v1/runs/"+url.PathEscape(id)+"/submit", nil)
}

// SubmitExpecting freezes a run's change set only if its hash is still
// hash, the one reviewed; a workspace changed since gives a conflict.
func (c *Client) SubmitExpecting(ctx context.Context, id, hash string) (*paddock.ChangeSet, error) {
	return c.changeSet(ctx, "POST", "/v1/runs/"+url.PathEscape(id)+"/submit", paddock.SubmitRequest{ExpectHash: hash})
}

// Approve approves the frozen change set with this hash.
func (c *Client) Approve(ctx context.Context, id, hash string) (*paddock.Submission, error) {
	var s paddock.Submission
	return &s, c.do(ctx, "POST", "/v1/runs/"+url.PathEscape(id)+"/approve", paddock.ApproveRequest{Hash: hash}, &s)
}

// Apply commits the approved change set to a new branch of the project.
func (c *Client) Apply(ctx context.Context, id string, req paddock.ApplyRequest) (*paddock.Submission, error) {
	var s paddock.Submission
	return &s, c.do(ctx, "POST", "/v1/runs/"+url.PathEscape(id)+"/apply", req, &s)
}

// Undo reverses an apply into the working tree.
func (c *Client) Undo(ctx context.Context, id string) (*paddock.Submission, error) {
	var s paddock.Submission
	return &s, c.do(ctx, "POST", "/v1/runs/"+url.PathEscape(id)+"/undo", nil, &s)
}

// ForAgent returns a copy of c whose calls are made for a run's agent (as
// paddock mcp makes them): a run a daemon restart checkpointed is resumed
// by the agent's next call.
func (c *Client) ForAgent() *Client {
	cp := *c
	cp.agent = true
	return &cp
}

// OnUnreachable returns a copy of c that, when nothing listens where it
// connects (Unreachable), calls fn with that error, once for the copy and
// every copy made of it (concurrent requests wait for the one call, each
// no longer than its own ctx), and then sends the request again if fn
// returned nil (it started a daemon, say), or fails with fn's error. A
// call of fn that fails once its request's ctx has ended does not count:
// the next request that finds nothing listening calls it again. No byte of a request is sent before its
// connection is made, so sending it again is safe whatever it does. The
// CLI starts its daemon this way: at its first request, not with a
// request of its own before every call.
func (c *Client) OnUnreachable(fn func(ctx context.Context, err error) error) *Client {
	cp := *c
	cp.reach = &reachHook{fn: fn}
	return &cp
}

// WithTimeout returns a copy of c whose requests fail when their
// connection sends or receives nothing for d: a bound on a daemon that
// stopped answering, enforced by the kernel on the unix socket, so that a
// call bounded this way starts no timer of the runtime's (a context's
// deadline does, and with it the runtime's network poller: a tenth of a
// CLI call's start). A stream (events, exec output) that is quiet for d
// fails too.
func (c *Client) WithTimeout(d time.Duration) *Client {
	cp := *c
	cp.idle = d
	return &cp
}

// WithToken returns a copy of c that authenticates with token (a run's
// token from Bootstrap, or the daemon's).
func (c *Client) WithToken(token string) *Client {
	cp := *c
	cp.token = token
	return &cp
}

// Bootstrap binds a new run to an agent and a task, and returns its token.
func (c *Client) Bootstrap(ctx context.Context, req paddock.BootstrapRequest) (*paddock.BootstrapResult, error) {
	var res paddock.BootstrapResult
	return &res, c.do(ctx, "POST", "/v1/bootstrap", req, &res)
}

// Artifact returns one of a run's artifacts.
func (c *Client) Artifact(ctx context.Context, id, kind string) (*paddock.Artifact, error) {
	var a paddock.Artifact
	return &a, c.do(ctx, "GET", "/v1/runs/"+url.PathEscape(id)+"/artifacts/"+url.PathEscape(kind), nil, &a)
}

// StartJob starts a job in a run.
func (c *Client) StartJob(ctx context.Context, id string, req paddock.StartJobRequest) (*paddock.Job, error) {
	var j paddock.Job
	return &j, c.do(ctx, "POST", "/v1/runs/"+url.PathEscape(id)+"/jobs", req, &j)
}

// Job returns a job's status.
func (c *Client) Job(ctx context.Context, id, job string) (*paddock.Job, error) {
	var j paddock.Job
	return &j, c.do(ctx, "GET", "/v1/runs/"+url.PathEscape(id)+"/jobs/"+url.PathEscape(job), nil, &j)
}

// CancelJob cancels a running job.
func (c *Client) CancelJob(ctx context.Context, id, job string) (*paddock.Job, error) {
	var j paddock.Job
	return &j, c.do(ctx, "POST", "/v1/runs/"+url.PathEscape(id)+"/jobs/"+url.PathEscape(job)+"/cancel", nil, &j)
}

// JobStatus says where a run's jobs stand: idle before its first job,
// else its latest job and that job's state.
func (c *Client) JobStatus(ctx context.Context, id string) (*paddock.JobStatus, error) {
	var s paddock.JobStatus
	return &s, c.do(ctx, "GET", "/v1/runs/"+url.PathEscape(id)+"/status", nil, &s)
}

// Jobs lists a run's jobs, oldest first.
func (c *Client) Jobs(ctx context.Context, id string) ([]*paddock.Job, error) {
	var js []*paddock.Job
	return js, c.do(ctx, "GET", "/v1/runs/"+url.PathEscape(id)+"/jobs", nil, &js)
}

// OpenAPI returns the daemon's OpenAPI 3 document of its API, as served.
func (c *Client) OpenAPI(ctx context.Context) ([]byte, error) {
	resp, err := c.send(ctx, "GET", "/v1/openapi.json", nil, "")
	if err != nil {
		return nil, err
	}
	defer resp.body.Close()
	return io.ReadAll(io.LimitReader(resp.body, 16<<20))
}

// WithObserver returns a copy of c that calls see with the method and
// path (with its query) of every request it sends, before sending it: for
// tests that check which routes a script used, and for tracing.
func (c *Client) WithObserver(see func(method, path string)) *Client {
	cp := *c
	cp.observe = see
	return &cp
}

func runPath(id string, rest ...string) string {
	p := "/v1/runs/" + url.PathEscape(id)
	for _, r := range rest {
		p += "/" + url.PathEscape(r)
	}
	return p
}

// AddAgent stores an agent definition (its TOML), replacing one of its name.
func (c *Client) AddAgent(ctx context.Context, req paddock.AddAgentRequest) (*paddock.AgentRecord, error) {
	var a paddock.AgentRecord
	return &a, c.do(ctx, "POST", "/v1/agents", req, &a)
}

// Agents lists the built-in and stored agent definitions.
func (c *Client) Agents(ctx context.Context) ([]*paddock.AgentRecord, error) {
	var as []*paddock.AgentRecord
	return as, c.do(ctx, "GET", "/v1/agents", nil, &as)
}

// Agent returns an agent definition by name.
func (c *Client) Agent(ctx context.Context, name string) (*paddock.AgentRecord, error) {
	var a paddock.AgentRecord
	return &a, c.do(ctx, "GET", "/v1/agents/"+url.PathEscape(name), nil, &a)
}

// RemoveAgent removes a stored definition; runs made with it keep theirs.
func (c *Client) RemoveAgent(ctx context.Context, name string) error {
	return c.do(ctx, "DELETE", "/v1/agents/"+url.PathEscape(name), nil, nil)
}

// Capabilities says what a run may do now.
func (c *Client) Capabilities(ctx context.Context, id string) (*paddock.Capabilities, error) {
	var caps paddock.Capabilities
	return &caps, c.do(ctx, "GET", runPath(id, "capabilities"), nil, &caps)
}

// RequestAccess files a request for more than the run's definition grants.
func (c *Client) RequestAccess(ctx context.Context, id string, in paddock.AccessRequestInput) (*paddock.AccessRequest, error) {
	var q paddock.AccessRequest
	return &q, c.do(ctx, "POST", runPath(id, "requests"), in, &q)
}

// AccessRequests lists a run's access requests, oldest first.
func (c *Client) AccessRequests(ctx context.Context, id string) ([]*paddock.AccessRequest, error) {
	var qs []*paddock.AccessRequest
	return qs, c.do(ctx, "GET", runPath(id, "requests"), nil, &qs)
}

// Grant grants a run's pending access request (operator credentials only).
func (c *Client) Grant(ctx context.Context, id, req, note string) (*paddock.AccessRequest, error) {
	var q paddock.AccessRequest
	return &q, c.do(ctx, "POST", runPath(id, "requests", req, "grant"), paddock.DecideRequest{Note: note}, &q)
}

// Deny denies a run's pending access request (operator credentials only).
func (c *Client) Deny(ctx context.Context, id, req, note string) (*paddock.AccessRequest, error) {
	var q paddock.AccessRequest
	return &q, c.do(ctx, "POST", runPath(id, "requests", req, "deny"), paddock.DecideRequest{Note: note}, &q)
}

// Verify runs the project manifest's checks in the run.
func (c *Client) Verify(ctx context.Context, id string, req paddock.VerifyRequest) (*paddock.VerifyResult, error) {
	var v paddock.VerifyResult
	return &v, c.do(ctx, "POST", runPath(id, "verify"), req, &v)
}

// ProjectManifest returns what verify runs in a new run of the project.
func (c *Client) ProjectManifest(ctx context.Context, name string) (json.RawMessage, error) {
	var raw json.RawMessage
	return raw, c.do(ctx, "GET", "/v1/projects/"+url.PathEscape(name)+"/manifest", nil, &raw)
}

// UILogin asks for a one-time login URL to the review page.
func (c *Client) UILogin(ctx context.Context) (*paddock.UILogin, error) {
	var l paddock.UILogin
	return &l, c.do(ctx, "POST", "/v1/ui/login", nil, &l)
}

// Bundle streams run id's signed bundle to w.
func (c *Client) Bundle(ctx context.Context, id string, w io.Writer) error {
	resp, err := c.send(ctx, "GET", "/v1/runs/"+url.PathEscape(id)+"/bundle", nil, "")
	if err != nil {
		return err
	}
	defer resp.body.Close()
	if _, err := io.Copy(w, resp.body); err != nil {
		return fmt.Errorf("reading the bundle: %w", err)
	}
	return nil
}

// BundleKey returns the public key the daemon signs bundles with.
func (c *Client) BundleKey(ctx context.Context) (*paddock.BundleKey, error) {
	var k paddock.BundleKey
	return &k, c.do(ctx, "GET", "/v1/bundle-key", nil, &k)
}

// Import restores a run from the bundle body holds.
// A body other than a *bytes.Reader or *strings.Reader is sent as it is
// read, beside the wait for the answer: when the daemon answers before its
// end (a refusal), the call returns without waiting for it, and a read of
// body under way then, which may end only when body has more to give, is
// the caller's to end (net/http would close body; this client never
// closes what it is given).
func (c *Client) Import(ctx context.Context, req paddock.ImportRequest, body io.Reader) (*paddock.ImportResult, error) {
	q := url.Values{}
	if req.Project != "" {
		q.Set("project", req.Project)
	}
	if req.Kind != "" {
		q.Set("kind", req.Kind)
	}
	for _, k := range req.Trust {
		q.Add("trust", k)
	}
	if req.Untrusted {
		q.Set("untrusted", "true")
	}
	var res paddock.ImportResult
	return &res, c.doRaw(ctx, "POST", "/v1/import?"+q.Encode(), body, "application/vnd.paddock.bundle+tar", &res)
}

// QueueAdd puts an approved run in its project's merge queue.
func (c *Client) QueueAdd(ctx context.Context, id string, req paddock.QueueAddRequest) (*paddock.QueueEntry, error) {
	var e paddock.QueueEntry
	return &e, c.do(ctx, "POST", "/v1/runs/"+url.PathEscape(id)+"/queue", req, &e)
}

// Queue lists the merge queue (of project, if named; finished entries too if all).
func (c *Client) Queue(ctx context.Context, project string, all bool) ([]*paddock.QueueEntry, error) {
	q := url.Values{}
	if project != "" {
		q.Set("project", project)
	}
	if all {
		q.Set("all", "true")
	}
	var es []*paddock.QueueEntry
	return es, c.do(ctx, "GET", "/v1/queue?"+q.Encode(), nil, &es)
}

// QueueEntry returns a run's newest queue entry.
func (c *Client) QueueEntry(ctx context.Context, id string) (*paddock.QueueEntry, error) {
	var e paddock.QueueEntry
	return &e, c.do(ctx, "GET", "/v1/runs/"+url.PathEscape(id)+"/queue", nil, &e)
}

// QueueRemove takes a run out of the merge queue.
func (c *Client) QueueRemove(ctx context.Context, id string) (*paddock.QueueEntry, error) {
	var e paddock.QueueEntry
	return &e, c.do(ctx, "DELETE", "/v1/runs/"+url.PathEscape(id)+"/queue", nil, &e)
}

// QueueUndo moves back the branch a queued run landed on.
func (c *Client) QueueUndo(ctx context.Context, id string) (*paddock.QueueEntry, error) {
	var e paddock.QueueEntry
	return &e, c.do(ctx, "POST", "/v1/runs/"+url.PathEscape(id)+"/queue/undo", nil, &e)
}

// ApproveHunks approves only these hunks of the submitted change set hash.
func (c *Client) ApproveHunks(ctx context.Context, id, hash string, hunks []int) (*paddock.Submission, error) {
	var s paddock.Submission
	return &s, c.do(ctx, "POST", "/v1/runs/"+url.PathEscape(id)+"/approve", paddock.ApproveRequest{Hash: hash, Hunks: hunks}, &s)
}

// Blame says which calls wrote each hunk of a run's change set (the
// submitted one with hash, or the live one when hash is empty).
func (c *Client) Blame(ctx context.Context, id, hash string) (*paddock.Blame, error) {
	path := "/v1/runs/" + url.PathEscape(id) + "/changeset/blame"
	if hash != "" {
		path += "?hash=" + url.QueryEscape(hash)
	}
	var b paddock.Blame
	return &b, c.do(ctx, "GET", path, nil, &b)
}

// Nodes lists the nodes that share the daemon's store (unsupported on a
// daemon of its own).
func (c *Client) Nodes(ctx context.Context) ([]paddock.Node, error) {
	var out []paddock.Node
	return out, c.do(ctx, "GET", "/v1/nodes", nil, &out)
}

// Adopt restores a lost node's run on the node the client talks to, from
// its checkpoint in the shared store, and takes over its interrupted job.
func (c *Client) Adopt(ctx context.Context, id string) (*paddock.AdoptResult, error) {
	var res paddock.AdoptResult
	return &res, c.do(ctx, "POST", "/v1/runs/"+url.PathEscape(id)+"/adopt", nil, &res)
}

// ProjectCheckout says how many uncommitted changes the project's checkout
// holds, as the daemon reads it (a new run does not start with them).
func (c *Client) ProjectCheckout(ctx context.Context, name string) (*paddock.CheckoutStatus, error) {
	var s paddock.CheckoutStatus
	return &s, c.do(ctx, "GET", "/v1/projects/"+url.PathEscape(name)+"/checkout", nil, &s)
}

// WhoAmI returns the caller as the daemon sees it: a principal with its
// role and projects, the operator, or a run's agent.
func (c *Client) WhoAmI(ctx context.Context) (*paddock.Caller, error) {
	var who paddock.Caller
	return &who, c.do(ctx, "GET", "/v1/whoami", nil, &who)
}

// AddPrincipal adds a named person or service with a role (an admin's).
func (c *Client) AddPrincipal(ctx context.Context, req paddock.PrincipalRequest) (*paddock.Principal, error) {
	var p paddock.Principal
	return &p, c.do(ctx, "POST", "/v1/principals", req, &p)
}

// Principals lists the principals.
func (c *Client) Principals(ctx context.Context) ([]*paddock.Principal, error) {
	var ps []*paddock.Principal
	return ps, c.do(ctx, "GET", "/v1/principals", nil, &ps)
}

// Principal returns one principal.
func (c *Client) Principal(ctx context.Context, name string) (*paddock.Principal, error) {
	var p paddock.Principal
	return &p, c.do(ctx, "GET", "/v1/principals/"+url.PathEscape(name), nil, &p)
}

// SetPrincipal replaces a principal's kind, role, projects and uid.
func (c *Client) SetPrincipal(ctx context.Context, name string, req paddock.PrincipalRequest) (*paddock.Principal, error) {
	var p paddock.Principal
	return &p, c.do(ctx, "PATCH", "/v1/principals/"+url.PathEscape(name), req, &p)
}

// RemovePrincipal removes a principal and its tokens.
func (c *Client) RemovePrincipal(ctx context.Context, name string) (*paddock.Principal, error) {
	var p paddock.Principal
	return &p, c.do(ctx, "DELETE", "/v1/principals/"+url.PathEscape(name), nil, &p)
}

// CreateToken makes a token for a principal; its Secret is shown once.
func (c *Client) CreateToken(ctx context.Context, req paddock.TokenRequest) (*paddock.NewToken, error) {
	var t paddock.NewToken
	return &t, c.do(ctx, "POST", "/v1/tokens", req, &t)
}

// Tokens lists a principal's tokens (every token if principal is "").
func (c *Client) Tokens(ctx context.Context, principal string) ([]*paddock.Token, error) {
	var ts []*paddock.Token
	p := "/v1/tokens"
	if principal != "" {
		p += "?principal=" + url.QueryEscape(principal)
	}
	return ts, c.do(ctx, "GET", p, nil, &ts)
}

// RevokeToken revokes a token by its id.
func (c *Client) RevokeToken(ctx context.Context, id string) (*paddock.Token, error) {
	var t paddock.Token
	return &t, c.do(ctx, "DELETE", "/v1/tokens/"+url.PathEscape(id), nil, &t)
}
